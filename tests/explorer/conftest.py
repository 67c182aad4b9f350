"""Fixtures for the explorer's tests: the sample store, apps over it, and determinism.

The sample store is built once per session by ``fixtures/explorer/sample_store.py`` (the real
agent loop with test models, fixed ids and clock). Tests that write get their own copy.
"""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from agent.providers import FunctionModel, ModelRequest, Provider
from explorer import ExplorerApp, PersonaStore, StoreSource, sandbox_registry
from tracer import ItemKind, Store

ROOT = Path(__file__).resolve().parents[2]


def _load_builder(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"explorer_{name}", ROOT / f"fixtures/explorer/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sample = _load_builder("sample_store")
team = _load_builder("team_store")


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Render times in UTC and give personas fixed ids, so screens and snapshots never drift."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    counter = itertools.count(1)
    monkeypatch.setattr("explorer.sandbox._personas.new_id", lambda prefix: f"{prefix}-{next(counter):06d}")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(scope="session")
def sample_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample store, built once (read it; copy it to write)."""
    return sample.build_sample_store(tmp_path_factory.mktemp("sample") / "sample.duckdb")


@pytest.fixture(scope="session")
def team_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team store (a lead, a researcher and a writer through a five-step plan), built once: read it."""
    return team.build_team_store(tmp_path_factory.mktemp("team") / "team.duckdb")


@pytest.fixture
def sample_copy(sample_path: Path, tmp_path: Path) -> Path:
    """A private copy of the sample store that a test may write to."""
    target = tmp_path / "sample.duckdb"
    shutil.copy(sample_path, target)
    return target


@pytest.fixture
def wrong_run() -> str:
    """The id of the sample's wrong answer (third run of session trip-7f3a)."""
    return "r-000003"


def echo_model(request: ModelRequest) -> str:
    """A chat model for tests: answers with what it was told, and how many messages it saw."""
    user = [ci.item.text for ci in request.context if ci.item.kind == ItemKind.USER]
    return f"echo: {user[-1]} (message {len(user)})"


@pytest.fixture
def echo_provider() -> Callable[[], Provider]:
    """Makes the tests' chat model (see :func:`echo_model`)."""
    return lambda: FunctionModel(echo_model, name="echo")


@pytest.fixture
def assistant_provider() -> Callable[[Any], Provider]:
    """The sample's assistant model, for counterfactual and blame re-runs of its runs."""
    return lambda _run: FunctionModel(sample._assistant, name="scripted")


@pytest.fixture
def open_app() -> Iterator[Callable[..., ExplorerApp]]:
    """Build explorer apps over store files; the stores are closed after the test."""
    stores: list[Store] = []

    def build(path: Path, *, read_only: bool = False, provider: Callable[[], Provider] | None = None,
              **kwargs: Any) -> ExplorerApp:
        store = Store.open(path, read_only=read_only)
        stores.append(store)
        personas = None if read_only else PersonaStore(store, known_tools=sandbox_registry().names(),
                                                       clock=lambda: 1741942800.0)
        return ExplorerApp(
            StoreSource(store, label=path.name), personas=personas, poll_interval=None,
            chat_provider=provider or (lambda: FunctionModel(echo_model, name="echo")), **kwargs,
        )

    yield build
    for store in stores:
        store.close()


async def _settle(pilot: Pilot[Any], rounds: int = 4) -> None:
    for _ in range(rounds):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


@pytest.fixture
def settle() -> Callable[..., Any]:
    """``await settle(pilot)``: let workers finish and their messages land (reads run in threads)."""
    return _settle

"""footprint's pytest plugin (registered by the ``pytest11`` entry point, so installing footprint enables it).

It blocks real model requests for the whole session — a test that reaches a real model fails,
naming the provider, even when the agent turned the refusal into a failed run — and provides fixtures:

``footprint_store``           a store in a temporary file, closed after the test
``footprint_recorder``        a recorder on it (``sync`` durability: what a test reads is written)
``footprint_scripted_model``  ``make(*responses, repeat=False)`` -> :class:`ScriptedModel`
``footprint_function_model``  ``make(fn)`` -> :class:`FunctionModel`
``footprint_replay``          ``make(cassette=None, provider=None)`` -> :class:`ReplayProvider`
``footprint_snapshot``        syrupy's ``snapshot`` rendering runs as a flowchart (``tracer.syrupy``)

Record once against a real model, then replay in CI::

    def test_weather(footprint_replay, footprint_recorder):
        model = footprint_replay(provider=lambda: OpenAIProvider("gpt-4o-mini"))
        ...

``pytest --footprint-record`` (or ``@pytest.mark.footprint_record`` on one test) records the
cassettes again from the real provider and lets real model requests through; otherwise the
cassette (``<test dir>/cassettes/<test name>.json`` unless named) is replayed with no network call.

The fixtures are plain (synchronous) fixtures. Agents run with ``asyncio.run(agent.run(...))`` in
a plain test; ``async def`` tests need an async test runner such as pytest-asyncio
(``pip install pytest-asyncio`` and ``asyncio_mode = "auto"``), which footprint does not install.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tracer import Recorder, Store

    from .providers import FunctionModel, Provider, ScriptedModel

RECORD_OPTION = "--footprint-record"
RECORD_MARKER = "footprint_record"
EXPECT_BLOCKED_MARKER = "footprint_expects_blocked"  # a test that makes real requests to see them refused
BLOCK_ENV = "FOOTPRINT_BLOCK_REAL_MODELS"  # read by agent.providers when it is first imported


def _block(blocked: bool) -> bool:
    """Block (or allow) real model requests; returns the previous setting.

    The plugin is loaded by every pytest run where footprint is installed, so it does not import
    the agent package (and the provider SDKs) itself: until something imports it, the environment
    variable carries the setting; once imported, its switch is flipped directly.
    """
    base = sys.modules.get("agent.providers._base")
    before = base.real_models_blocked() if base is not None else os.environ.get(BLOCK_ENV) == "1"
    os.environ[BLOCK_ENV] = "1" if blocked else "0"
    if base is not None:
        base.block_real_models(blocked)
    return bool(before)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--footprint-record``: record replay cassettes again from the real providers."""
    group = parser.getgroup("footprint")
    group.addoption(
        RECORD_OPTION, action="store_true", default=False,
        help="record footprint replay cassettes again from the real providers (lets real model requests through)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and block real model requests unless recording."""
    config.addinivalue_line(
        "markers", f"{RECORD_MARKER}: record this test's footprint replay cassettes from the real provider",
    )
    config.addinivalue_line(
        "markers", f"{EXPECT_BLOCKED_MARKER}: this test makes real model requests on purpose, to see them refused",
    )
    _block(not config.getoption(RECORD_OPTION))


def _recording(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption(RECORD_OPTION)) or request.node.get_closest_marker(RECORD_MARKER) is not None


@pytest.fixture(autouse=True)
def _footprint_block_real_models(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test runs with real model requests blocked, unless it records its cassettes."""
    before = _block(not _recording(request))
    try:
        yield
    finally:
        _block(before)


def _refused() -> list[str]:
    base = sys.modules.get("agent.providers._base")
    return base.blocked_requests if base is not None else []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail a test that made a real model request, whether or not it looked at the run's result.

    The agent turns the refusal into a failed run, as it does any provider error: a test that
    asserted nothing about the result would pass with a run that never reached a model. A test
    marked ``footprint_expects_blocked`` makes such requests on purpose.
    """
    seen = len(_refused())
    result = yield
    refused = _refused()[seen:]
    if refused and item.get_closest_marker(EXPECT_BLOCKED_MARKER) is None:
        del _refused()[seen:]
        pytest.fail(
            f"{item.nodeid} made {len(refused)} real model request(s) ({', '.join(sorted(set(refused)))}) "
            f"while they are blocked: use ScriptedModel, FunctionModel or footprint_replay (a cassette, "
            f"recorded once with pytest {RECORD_OPTION})",
            pytrace=False,
        )
    return result


@pytest.fixture
def footprint_store(tmp_path: Path) -> Iterator[Store]:
    """A footprint store in a temporary DuckDB file; closed (and flushed) after the test."""
    from tracer import Store

    store = Store.open(tmp_path / "footprint.duckdb")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def footprint_recorder(footprint_store: Store) -> Recorder:
    """A recorder on :func:`footprint_store`; ``sync`` so every stage is readable once closed."""
    from tracer import Recorder

    return Recorder(footprint_store, durability="sync")


@pytest.fixture
def footprint_scripted_model() -> Callable[..., ScriptedModel]:
    """``make(*responses, repeat=False)``: a model answering with the scripted responses in order."""
    from .providers import ScriptedModel

    def make(*responses: Any, repeat: bool = False) -> ScriptedModel:
        return ScriptedModel(responses, repeat=repeat)

    return make


@pytest.fixture
def footprint_function_model() -> Callable[..., FunctionModel]:
    """``make(fn, name=None)``: a model answering with ``fn(request)`` (it can read its context)."""
    from .providers import FunctionModel

    def make(fn: Any, *, name: str | None = None) -> FunctionModel:
        return FunctionModel(fn, name=name)

    return make


@pytest.fixture
def footprint_replay(request: pytest.FixtureRequest) -> Callable[..., Provider]:
    """``make(cassette=None, provider=None, root=None)``: a replay provider for this test.

    Replays ``root/<cassette>.json`` (default: ``cassettes/`` beside the test file, named after the
    test). When recording (``--footprint-record`` or the ``footprint_record`` marker) it calls
    ``provider`` — a Provider, or a function returning one so that it is only built when recording
    — and writes the cassette again.
    """
    from .providers import Provider, ReplayProvider, cassette_path

    recording = _recording(request)

    def make(
        cassette: str | None = None,
        provider: Provider | Callable[[], Provider] | None = None,
        *,
        root: str | Path | None = None,
    ) -> Provider:
        name = cassette or request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
        folder = Path(root) if root is not None else request.path.parent / "cassettes"
        if not recording:
            path = cassette_path(name, folder)
            if not path.exists():
                pytest.fail(
                    f"{request.node.nodeid}: no replay cassette at {path}; record it once "
                    f"from the real provider with `pytest {RECORD_OPTION} {request.node.nodeid}` (or mark the "
                    f"test @pytest.mark.{RECORD_MARKER}), then commit it",
                    pytrace=False,
                )
            return ReplayProvider(name, mode="replay", root=folder)
        real = provider if isinstance(provider, Provider) or provider is None else provider()
        if real is None:
            raise pytest.UsageError(
                f"{request.node.nodeid}: recording cassette {name!r} needs footprint_replay(provider=...)"
            )
        return ReplayProvider(name, provider=real, mode="record", root=folder)

    return make


@pytest.fixture
def footprint_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot``, rendering recorded runs as a normalized text flowchart.

    ``assert footprint_snapshot == store.load_run(run_id)`` (or a list of runs, or the store).
    """
    from tracer.syrupy import FlowchartExtension

    return snapshot.use_extension(FlowchartExtension)

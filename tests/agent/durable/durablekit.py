"""Helpers the durable-session tests share: a scripted session and a storage that fails on demand."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agent.durable import (
    AgentProviders,
    DurableAgent,
    InMemoryPersistence,
    PersistenceContext,
    SessionPersistence,
    SessionRecord,
)
from agent.providers import FunctionModel, ModelRequest, Provider
from agent.tools import ToolLike

T = TypeVar("T")


def last_user(request: ModelRequest) -> str:
    return request.last_user_text()


def echo_model(name: str = "echo") -> FunctionModel:
    """Answers ``<name>: <the newest user message>``; ``compact`` requests get a summary."""

    def answer(request: ModelRequest) -> str:
        if "Summarise the conversation" in request.system_text():
            users = [ci.text for ci in request.context if ci.item.kind == "user"]
            return "summary: " + " | ".join(users)
        return f"{name}: {last_user(request)}"

    return FunctionModel(answer, name=name)


def session(
    persistence: SessionPersistence | None = None,
    llm: Provider | None = None,
    *,
    id: str = "s1",
    tools: Sequence[ToolLike] = (),
    providers: AgentProviders | None = None,
    **kwargs: Any,
) -> DurableAgent:
    """A DurableAgent on ``model`` (registered as ``m``, type ``test``)."""
    if providers is None:
        providers = AgentProviders().add("m", llm or echo_model(), "test")
    return DurableAgent(id, providers=providers, provider=kwargs.pop("provider", "m"),
                        persistence=persistence or InMemoryPersistence(), tools=tools, **kwargs)


class FlakyPersistence:
    """InMemoryPersistence whose operations fail while ``fail`` names them (``"append"``, ...)."""

    def __init__(self, inner: InMemoryPersistence | None = None) -> None:
        self.inner = inner or InMemoryPersistence()
        self.fail: set[str] = set()
        self.calls: list[str] = []

    def _check(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise OSError(f"injected {name} failure")

    async def transaction(self, ctx: PersistenceContext, work: Callable[[PersistenceContext], Awaitable[T]]) -> T:
        self._check("transaction")
        return await self.inner.transaction(ctx, work)

    async def load(self, ctx: PersistenceContext) -> Sequence[SessionRecord]:
        self._check("load")
        return await self.inner.load(ctx)

    async def append(self, ctx: PersistenceContext, record: SessionRecord) -> None:
        self._check("append")
        await self.inner.append(ctx, record)

    async def clear_records(self, ctx: PersistenceContext) -> None:
        self._check("clear_records")
        await self.inner.clear_records(ctx)

    async def read_values(self, ctx: PersistenceContext, prefix: str) -> Sequence[tuple[str, Any]]:
        self._check("read_values")
        return await self.inner.read_values(ctx, prefix)

    async def write_value(self, ctx: PersistenceContext, key: str, value: Any) -> None:
        self._check("write_value")
        await self.inner.write_value(ctx, key, value)

    async def delete_value(self, ctx: PersistenceContext, key: str) -> None:
        self._check("delete_value")
        await self.inner.delete_value(ctx, key)


async def records(persistence: SessionPersistence, session_id: str = "s1") -> list[SessionRecord]:
    return list(await persistence.load(PersistenceContext(session_id)))


async def values(persistence: SessionPersistence, prefix: str = "", session_id: str = "s1") -> list[tuple[str, Any]]:
    return list(await persistence.read_values(PersistenceContext(session_id), prefix))


def texts(agent: DurableAgent) -> list[tuple[str, str]]:
    return [(ci.item.kind, ci.text) for ci in agent.history]


class Gate:
    """A tool or model step that waits until the test opens it."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()

    async def wait(self) -> None:
        self.entered.set()
        await self.opened.wait()

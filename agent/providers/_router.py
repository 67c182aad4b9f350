"""Routing each request to one of several providers, and saying why.

By default the requested model name picks the route: ``{"gpt-": openai, "llama": local}`` sends
``gpt-4o-mini`` to ``openai`` and ``llama3.1:8b`` to ``local`` (the longest matching prefix wins).
A ``select`` callable can route on anything in the request instead — whether tools are offered,
how long the context is, a setting — by returning a route name. Cost- or capability-based routing
is a ``select`` function; routing with fallback is a route whose provider is a
:class:`~agent.providers.FallbackProvider`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from ..errors import UserError
from ._base import ModelRequest, ModelResponse, Provider, StreamEvent

Selector = Callable[[ModelRequest], str | None]

DEFAULT_ROUTE = "default"


@dataclass(frozen=True, slots=True)
class Route:
    """A routing decision: the route's name, its provider, and why it was chosen."""

    name: str
    provider: Provider
    reason: str


class ProviderRouter(Provider):
    """Sends each request to the provider of the route it selects, or to ``default``.

    Without ``select``, route names are model-name prefixes matched against the request's model.
    With ``select``, ``select(request)`` returns a route name, or None for the default; a name that
    is not a route is a configuration error. :meth:`choose` exposes the decision, reason included,
    so it can be recorded next to the inference it shaped.
    """

    def __init__(
        self,
        routes: Mapping[str, Provider],
        default: Provider,
        *,
        select: Selector | None = None,
    ) -> None:
        if DEFAULT_ROUTE in routes:
            raise UserError(f"ProviderRouter: {DEFAULT_ROUTE!r} names the default route; pick another name")
        self.routes: dict[str, Provider] = dict(routes)
        self.default = default
        self.select = select
        # Longest first so "gpt-4o" beats "gpt-" for "gpt-4o-mini".
        self._prefixes = sorted(self.routes, key=len, reverse=True)
        self.name = f"router({','.join(provider.name for provider in self._providers())})"
        self.real = any(provider.real for provider in self._providers())

    def __repr__(self) -> str:
        return f"ProviderRouter(routes={self.routes!r}, default={self.default!r})"

    def choose(self, request: ModelRequest) -> Route:
        """The route ``request`` takes, and why."""
        if self.select is not None:
            name = self.select(request)
            if name is None:
                return Route(DEFAULT_ROUTE, self.default, "the selector chose no route")
            provider = self.routes.get(name)
            if provider is None:
                known = ", ".join(repr(route) for route in self.routes) or "none"
                raise UserError(
                    f"ProviderRouter: the selector returned route {name!r}, which is not configured "
                    f"(routes: {known}); return one of them, or None for the default"
                )
            return Route(name, provider, f"the selector chose route {name!r}")
        model = request.model
        for prefix in self._prefixes:
            if model.startswith(prefix):
                return Route(prefix, self.routes[prefix], f"model {model!r} starts with {prefix!r}")
        if not model:
            return Route(DEFAULT_ROUTE, self.default, "the request names no model")
        return Route(DEFAULT_ROUTE, self.default, f"model {model!r} matches no route prefix")

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call on the chosen route's provider."""
        return await self.choose(request).provider.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """A stream from the chosen route's provider."""
        async for event in self.choose(request).provider.stream(request):
            yield event

    def count_tokens(self, request: ModelRequest) -> int:
        """The chosen route's provider's estimate."""
        return self.choose(request).provider.count_tokens(request)

    async def list_models(self) -> list[str]:
        """Every routed provider's models (default last), without duplicates."""
        models: dict[str, None] = {}
        for provider in self._providers():
            models.update(dict.fromkeys(await provider.list_models()))
        return list(models)

    def _providers(self) -> list[Provider]:
        """Each distinct provider once, routes first, then the default."""
        distinct: list[Provider] = []
        for provider in [*self.routes.values(), self.default]:
            if not any(provider is seen for seen in distinct):
                distinct.append(provider)
        return distinct

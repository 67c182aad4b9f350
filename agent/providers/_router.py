"""Routing each request to one of several providers, and saying why.

Three ways to pick a route, the first that applies:

* a **strategy** (``cost``, ``speed``, ``quality`` or ``balanced``) ranks the routes by their
  :class:`RouteProfile` (price, speed, quality, context window, capabilities) among those that
  meet the :class:`RoutingCriteria` — capabilities the request needs (``tools`` when it offers
  tools), a price ceiling, a context window, a quality floor, routes to leave out or prefer;
* a ``select`` callable returns a route name for the request (anything in it: tools, length, ...);
* otherwise the requested model name picks the route: ``{"gpt-": openai, "llama": local}`` sends
  ``gpt-4o-mini`` to ``openai`` (the longest matching prefix wins), anything else to ``default``.

The route's provider is asked for its own model when it has one (``OpenAIProvider("llama3.1:8b")``),
else for the model the agent named: the agent's model picks the route, and goes on to a provider
set up without one. Each attempt records the model it asked for.

:meth:`ProviderRouter.select_provider` gives the decision (a :class:`Route` with its reason, the
ranked candidates and why others were refused); :meth:`~ProviderRouter.complete_with_fallback`
tries the ranked routes in order under the fallback rules of :mod:`agent.providers._fallback`;
:meth:`~ProviderRouter.estimate_cost` prices a call before it is made. Every response carries the
route and the attempts, which the agent's loop records on the inference stage.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import NoRouteError, UserError
from ._base import Attempt, ModelRequest, ModelResponse, Provider, ResponseDone, StreamEvent, Usage
from ._fallback import (
    all_failed,
    attempt_of,
    falls_back,
    models_asked,
    not_ready,
    request_for,
)
from ._pricing import PRICES, Price, cost_of

Selector = Callable[[ModelRequest], str | None]

DEFAULT_ROUTE = "default"
STRATEGIES = ("cost", "speed", "quality", "balanced")
#: Token counts assumed by select_provider/estimate_cost when no request says otherwise.
TYPICAL_TOKENS = (1_000, 500)


@dataclass(frozen=True, slots=True)
class RouteProfile:
    """What a route offers, for strategy routing.

    ``price`` (dollars per million tokens) defaults to the :data:`~agent.providers.PRICES` entry
    of ``model``; ``speed`` and ``quality`` are relative scores from 0 to 1 (higher is better).
    """

    model: str = ""
    price: Price | None = None
    speed: float = 0.5
    quality: float = 0.5
    context_window: int = 128_000
    capabilities: frozenset[str] = frozenset({"tools", "streaming"})

    def __post_init__(self) -> None:
        for name in ("speed", "quality"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UserError(f"RouteProfile {name} must be between 0 and 1, not {value!r}")
        if self.context_window < 1:
            raise UserError(f"RouteProfile context_window must be at least 1, not {self.context_window!r}")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """Dollars for a call of this many tokens (0.0 when the price is unknown)."""
        prices = {self.model: self.price} if self.price is not None else PRICES
        return cost_of(self.model, Usage(input_tokens, output_tokens), prices)


@dataclass(frozen=True, slots=True)
class RoutingCriteria:
    """What a route must offer: ``capabilities`` it must have, ``max_cost`` dollars for the call's
    tokens, ``min_context_window``, ``min_quality``; routes in ``exclude`` are never taken and
    those in ``prefer`` win ties (in that order)."""

    capabilities: frozenset[str] = frozenset()
    max_cost: float | None = None
    min_context_window: int = 0
    min_quality: float = 0.0
    exclude: frozenset[str] = frozenset()
    prefer: tuple[str, ...] = ()

    def merged(self, needed: Iterable[str]) -> RoutingCriteria:
        """These criteria with ``needed`` capabilities added."""
        return dataclasses.replace(self, capabilities=self.capabilities | frozenset(needed))


@dataclass(frozen=True, slots=True)
class Route:
    """A routing decision: the route's name, its provider, and why it was chosen.

    For strategy routing also the ``strategy``, the route's ``model``, the ``estimated_cost`` of
    the call, the ``candidates`` in ranked order and why each refused route was refused.
    """

    name: str
    provider: Provider
    reason: str
    strategy: str | None = None
    model: str = ""
    estimated_cost: float | None = None
    candidates: tuple[str, ...] = ()
    rejected: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form recorded on the inference stage."""
        body: dict[str, Any] = {"route": self.name, "provider": self.provider.name, "type": self.provider.type,
                                "reason": self.reason}
        if self.strategy is not None:
            body.update(strategy=self.strategy, model=self.model, estimated_cost=self.estimated_cost,
                        candidates=list(self.candidates), rejected=dict(self.rejected))
        return body


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """What a call would cost on the route a strategy picks, before it is made."""

    route: str
    model: str
    input_tokens: int
    output_tokens: int
    estimated_cost: float


class ProviderRouter(Provider):
    """Sends each request to the provider of the route it selects, or to ``default``.

    ``profiles`` describe routes (``default`` included) for strategy routing; ``strategy`` and
    ``criteria`` make every request routed that way; ``fallback=True`` makes :meth:`complete` try
    the next ranked route when one fails (:meth:`complete_with_fallback`). Without a strategy,
    ``select(request)`` returns a route name (None: the default; an unknown name is a
    configuration error), and without ``select`` route names are model-name prefixes. A selector
    reads the agent's model as :attr:`ModelRequest.requested_model` (``request.model`` is the one
    asked, left out when the routes' providers ask for different ones).
    """

    type = "router"

    def __init__(
        self,
        routes: Mapping[str, Provider],
        default: Provider,
        *,
        select: Selector | None = None,
        profiles: Mapping[str, RouteProfile] | None = None,
        strategy: str | None = None,
        criteria: RoutingCriteria | None = None,
        fallback: bool = False,
    ) -> None:
        if DEFAULT_ROUTE in routes:
            raise UserError(f"ProviderRouter: {DEFAULT_ROUTE!r} names the default route; pick another name")
        self.routes: dict[str, Provider] = dict(routes)
        self.default = default
        self.select = select
        self.profiles: dict[str, RouteProfile] = dict(profiles or {})
        unknown = sorted(set(self.profiles) - set(self.routes) - {DEFAULT_ROUTE})
        if unknown:
            raise UserError(f"ProviderRouter: profiles for routes that do not exist: {', '.join(unknown)}")
        self.strategy = _check_strategy(strategy)
        self.criteria = criteria or RoutingCriteria()
        self.fallback = fallback
        # Longest first so "gpt-4o" beats "gpt-" for "gpt-4o-mini".
        self._prefixes = sorted(self.routes, key=len, reverse=True)
        self.name = f"router({','.join(provider.name for provider in self._providers())})"
        self.real = any(provider.real for provider in self._providers())

    def __repr__(self) -> str:
        return f"ProviderRouter(routes={self.routes!r}, default={self.default!r})"

    def is_ready(self) -> bool:
        """True when any routed provider is ready."""
        return any(provider.is_ready() for provider in self._providers())

    @property
    def configured_model(self) -> str:
        """None (""): a router has no model of its own; each route's provider asks for its own."""
        return ""

    def model_for(self, requested: str) -> str:
        """The model a request naming ``requested`` is sent to, or "" when that depends on the route
        taken: routing by model prefix knows the route beforehand; a strategy or selector does not."""
        if self.strategy is None and self.select is None:
            route, provider = self._by_prefix(requested)
            model = models_asked([provider], requested)
            # with no model named, the default's own must not send the request down another route
            return model if requested or self._by_prefix(model)[0] == route else ""
        return models_asked(self._providers(), requested)

    # ------------------------------------------------------------------ deciding

    def available(self) -> dict[str, Provider]:
        """Every route whose provider is ready, the default last."""
        everything = {**self.routes, DEFAULT_ROUTE: self.default}
        return {name: provider for name, provider in everything.items() if provider.is_ready()}

    def choose(self, request: ModelRequest) -> Route:
        """The route ``request`` takes, and why (strategy, selector or model prefix)."""
        if self.strategy is not None:
            return self.select_provider(self.criteria, self.strategy, request=request)
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
        model = request.requested_model
        name, provider = self._by_prefix(model)
        if name != DEFAULT_ROUTE:
            return Route(name, provider, f"model {model!r} starts with {name!r}")
        if not model:
            return Route(DEFAULT_ROUTE, self.default, "the request names no model")
        return Route(DEFAULT_ROUTE, self.default, f"model {model!r} matches no route prefix")

    def _by_prefix(self, model: str) -> tuple[str, Provider]:
        """The route whose prefix ``model`` starts with (the longest), else the default."""
        for prefix in self._prefixes:
            if model.startswith(prefix):
                return prefix, self.routes[prefix]
        return DEFAULT_ROUTE, self.default

    def select_provider(
        self, criteria: RoutingCriteria | None = None, strategy: str | None = None, *,
        request: ModelRequest | None = None,
    ) -> Route:
        """The best route under ``strategy`` (default: the router's, else ``balanced``) among those
        meeting ``criteria``; raises :class:`NoRouteError` saying why each route was refused.

        With a ``request``, the capabilities it needs (``tools`` when it offers tools) are
        required and costs are estimated for its length; without, for :data:`TYPICAL_TOKENS`.
        """
        ranked, rejected, strategy, tokens = self._rank(criteria, strategy, request)
        if not ranked:
            why = "; ".join(f"{name}: {reason}" for name, reason in rejected.items()) or "no routes"
            raise NoRouteError(f"{self.name}: no route meets the criteria under strategy {strategy!r} ({why})",
                               provider=self.name)
        best, profile = ranked[0]
        providers = {**self.routes, DEFAULT_ROUTE: self.default}
        reason = f"{strategy}: {_merit(strategy, profile)}"
        if len(ranked) > 1:
            reason += f", ahead of {', '.join(name for name, _ in ranked[1:])}"
        return Route(best, providers[best], reason, strategy, profile.model, profile.cost(*tokens),
                     tuple(name for name, _ in ranked), rejected)

    def estimate_cost(
        self, input_tokens: int, output_tokens: int, criteria: RoutingCriteria | None = None,
        strategy: str | None = None,
    ) -> CostEstimate:
        """What a call of these token counts would cost on the route ``strategy`` picks."""
        if input_tokens < 0 or output_tokens < 0:
            raise UserError(f"estimate_cost: token counts must not be negative ({input_tokens}, {output_tokens})")
        route = self.select_provider(criteria, strategy)
        profile = self._profile(route.name)
        return CostEstimate(route.name, profile.model, input_tokens, output_tokens,
                            profile.cost(input_tokens, output_tokens))

    def _rank(
        self, criteria: RoutingCriteria | None, strategy: str | None, request: ModelRequest | None,
    ) -> tuple[list[tuple[str, RouteProfile]], dict[str, str], str, tuple[int, int]]:
        strategy = _check_strategy(strategy) or self.strategy or "balanced"
        wanted = criteria or self.criteria
        tokens = TYPICAL_TOKENS
        if request is not None:
            wanted = wanted.merged(["tools"] if request.tool_definitions() else [])
            max_tokens = request.settings().get("max_tokens")
            tokens = (self.default.count_tokens(request), int(max_tokens or TYPICAL_TOKENS[1]))
        rejected: dict[str, str] = {}
        fitting: list[tuple[str, RouteProfile]] = []
        everything = {**self.routes, DEFAULT_ROUTE: self.default}
        for name, provider in everything.items():
            profile = self._profile(name)
            refusal = _refusal(name, provider, profile, wanted, tokens)
            if refusal:
                rejected[name] = refusal
            else:
                fitting.append((name, profile))
        order = {name: index for index, name in enumerate(everything)}
        prefer = {name: index for index, name in enumerate(wanted.prefer)}
        most = max((p.cost(*tokens) for _, p in fitting), default=0.0) or 1.0

        def score(entry: tuple[str, RouteProfile]) -> tuple[float, int, int]:
            name, profile = entry
            merit = {
                "cost": -profile.cost(*tokens),
                "speed": profile.speed,
                "quality": profile.quality,
                "balanced": 0.4 * profile.quality + 0.3 * profile.speed + 0.3 * (1 - profile.cost(*tokens) / most),
            }[strategy]
            return (-merit, prefer.get(name, len(prefer)), order[name])

        return sorted(fitting, key=score), rejected, strategy, tokens

    def _profile(self, name: str) -> RouteProfile:
        profile = self.profiles.get(name)
        if profile is None:
            provider = self.default if name == DEFAULT_ROUTE else self.routes[name]
            profile = RouteProfile(model=str(getattr(provider, "model", "") or ""))
        return profile

    # ------------------------------------------------------------------ calling

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call on the chosen route's provider (every ranked route in turn with ``fallback``)."""
        if self.fallback:
            return await self.complete_with_fallback(request)
        route = self.choose(request)
        sent = request_for(route.provider, request, self.type)
        model = route.provider.model_for(sent.model)
        started = time.perf_counter()
        try:
            response = await route.provider.complete(sent)
        except Exception as error:
            error.attempts = [attempt_of(route.provider, error, started, model=model)]  # type: ignore[attr-defined]
            error.route = route.to_dict()  # type: ignore[attr-defined]
            raise
        return dataclasses.replace(response, route=route.to_dict(), attempts=response.attempts or (
            attempt_of(route.provider, None, started, model=model),))

    async def complete_with_fallback(
        self, request: ModelRequest, criteria: RoutingCriteria | None = None, strategy: str | None = None,
    ) -> ModelResponse:
        """Try the routes in ranked order (strategy) — or the chosen route, then the others in
        order — until one answers; the response's ``attempts`` lists every try, ``route`` the one
        that answered. When all fail, the error carries ``attempts`` too."""
        if self.strategy is not None or criteria is not None or strategy is not None:
            first = self.select_provider(criteria, strategy, request=request)
            names = list(first.candidates)
        else:
            first = self.choose(request)
            names = [first.name, *[n for n in [*self.routes, DEFAULT_ROUTE] if n != first.name]]
        everything = {**self.routes, DEFAULT_ROUTE: self.default}
        failures: list[tuple[Provider, Exception]] = []
        attempts: list[Attempt] = []
        for name in names:
            provider = everything[name]
            if not provider.is_ready():
                attempts.append(Attempt(provider.name, "skipped", provider.type, "not ready", "NotReady", True))
                continue
            sent = request_for(provider, request, self.type)
            model = provider.model_for(sent.model)
            started = time.perf_counter()
            try:
                response = await provider.complete(sent)
            except Exception as error:
                moves_on = falls_back(error)
                attempts.append(attempt_of(provider, error, started, fell_back=moves_on, model=model))
                if not moves_on:
                    error.attempts = list(attempts)  # type: ignore[attr-defined]
                    raise
                failures.append((provider, error))
                continue
            attempts.append(attempt_of(provider, None, started, model=model))
            route = first if name == first.name else dataclasses.replace(
                first, name=name, provider=provider, reason=f"{first.name} failed; next in order: {name}")
            return dataclasses.replace(response, route=route.to_dict(), attempts=tuple(attempts))
        raise all_failed(self.name, failures, attempts) if failures else not_ready(self.name, attempts)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """A stream from the chosen route's provider (the route is on the final response)."""
        route = self.choose(request)
        sent = request_for(route.provider, request, self.type)
        model = route.provider.model_for(sent.model)
        started = time.perf_counter()
        async for event in route.provider.stream(sent):
            if isinstance(event, ResponseDone):
                response = event.response
                event = ResponseDone(dataclasses.replace(response, route=route.to_dict(), attempts=response.attempts or (
                    attempt_of(route.provider, None, started, model=model),)))
            yield event

    def count_tokens(self, request: ModelRequest) -> int:
        """The chosen route's provider's estimate."""
        provider = self.choose(request).provider
        return provider.count_tokens(request_for(provider, request, self.type))

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


def _check_strategy(strategy: str | None) -> str | None:
    if strategy is not None and strategy not in STRATEGIES:
        raise UserError(f"ProviderRouter: strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    return strategy


def _refusal(
    name: str, provider: Provider, profile: RouteProfile, wanted: RoutingCriteria, tokens: tuple[int, int]
) -> str:
    if name in wanted.exclude:
        return "excluded"
    if not provider.is_ready():
        return "not ready"
    missing = sorted(wanted.capabilities - profile.capabilities)
    if missing:
        return f"lacks {', '.join(missing)}"
    if profile.context_window < max(wanted.min_context_window, tokens[0]):
        return f"context window {profile.context_window} is too small"
    if profile.quality < wanted.min_quality:
        return f"quality {profile.quality} is below {wanted.min_quality}"
    cost = profile.cost(*tokens)
    if wanted.max_cost is not None and cost > wanted.max_cost:
        return f"costs ${cost:.6f}, over ${wanted.max_cost:.6f}"
    return ""


def _merit(strategy: str, profile: RouteProfile) -> str:
    return {
        "cost": "the cheapest route that meets the criteria",
        "speed": f"the fastest route that meets the criteria (speed {profile.speed})",
        "quality": f"the best route that meets the criteria (quality {profile.quality})",
        "balanced": f"the best balance of quality {profile.quality}, speed {profile.speed} and price",
    }[strategy]

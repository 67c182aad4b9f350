"""Model providers behind one interface, and the test models that ship with footprint."""

from ._base import (
    Attempt,
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
    block_real_models,
    check_real_model_allowed,
    real_models_blocked,
)
from ._fallback import FallbackProvider
from ._openai import OpenAIProvider
from ._pricing import PRICES, Price, cost_of
from ._replay import ReplayProvider, cassette_path
from ._router import STRATEGIES, CostEstimate, ProviderRouter, Route, RouteProfile, RoutingCriteria
from ._testing import FunctionModel, ScriptedModel, calls, raw_call, tool_results

__all__ = [
    "PRICES",
    "STRATEGIES",
    "Attempt",
    "CostEstimate",
    "FallbackProvider",
    "FunctionModel",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Price",
    "Provider",
    "ProviderRouter",
    "ReplayProvider",
    "ResponseDone",
    "Route",
    "RouteProfile",
    "RoutingCriteria",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "Usage",
    "block_real_models",
    "calls",
    "cassette_path",
    "check_real_model_allowed",
    "cost_of",
    "raw_call",
    "real_models_blocked",
    "tool_results",
]

"""AgentBuilder: the fluent way to configure an :class:`AgentOrchestrator`.

    researcher = (create_agent()
                  .name("researcher").description("Finds facts")
                  .system_prompt("You research questions with the search tool.")
                  .provider(model).model("gpt-4o")
                  .tool(search)                                   # a Tool, or
                  .tool({"name": "lookup", "description": "...", "parameters": {...}}, lookup_fn)
                  .max_iterations(20).max_tokens(8192).temperature(0.5)
                  .build())

``build()`` checks that name, system prompt, provider and model are set and names what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from tracer import Recorder

from .._facts import FactStore
from ..providers import Provider
from ..tools import Tool, ToolLike, as_tool
from ..tools._tool import Execute
from ._config import REQUIRED, AgentConfig, MemoryOptions
from ._orchestrator import AgentOrchestrator
from .errors import AgentConfigError

_SETTERS = {"name": "name", "system_prompt": "system_prompt", "provider": "provider", "model": "model"}


class AgentBuilder:
    """Collects an agent's settings one call at a time; :meth:`build` makes the orchestrator."""

    def __init__(self) -> None:
        self._settings: dict[str, Any] = {}
        self._tools: list[Tool] = []
        self._memory = MemoryOptions()

    def _set(self, key: str, value: Any) -> AgentBuilder:
        self._settings[key] = value
        return self

    def name(self, name: str) -> AgentBuilder:
        """The agent's name (required)."""
        return self._set("name", name)

    def description(self, description: str) -> AgentBuilder:
        """What the agent does (a team and a sub-agent tool show it to other agents)."""
        return self._set("description", description)

    def system_prompt(self, prompt: str) -> AgentBuilder:
        """The system prompt (required)."""
        return self._set("system_prompt", prompt)

    def provider(self, provider: Provider) -> AgentBuilder:
        """The model provider (required)."""
        return self._set("provider", provider)

    def model(self, model: str) -> AgentBuilder:
        """The model name (required)."""
        return self._set("model", model)

    def tool(self, tool: ToolLike | dict[str, Any], executor: Execute | None = None) -> AgentBuilder:
        """Add a tool: a :class:`agent.Tool` or a typed function (as ``Agent(tools=)`` takes them), or a
        definition (name, description, parameters) and its executor."""
        if not isinstance(tool, dict):
            made = as_tool(tool, f"agent builder {self._settings.get('name') or '(unnamed)'}", len(self._tools))
            if executor is not None:
                raise AgentConfigError(f"tool {made.name}: a Tool carries its executor; pass no second one")
            self._tools.append(made)
            return self
        if executor is None:
            raise AgentConfigError(f"tool definition {tool.get('name', '?')!r} needs an executor")
        missing = [k for k in ("name", "description") if not tool.get(k)]
        if missing:
            raise AgentConfigError(f"tool definition {tool!r:.80} lacks {', '.join(missing)}")
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        self._tools.append(Tool(str(tool["name"]), str(tool["description"]), dict(parameters), executor))
        return self

    def tools(self, tools: Sequence[ToolLike]) -> AgentBuilder:
        """Add several tools (Tools or typed functions)."""
        for t in tools:
            self.tool(t)
        return self

    def max_iterations(self, n: int) -> AgentBuilder:
        """Model calls per execution before it stops (default 10)."""
        return self._set("max_iterations", n)

    def max_tokens(self, n: int) -> AgentBuilder:
        """Tokens per model response (default 4096)."""
        return self._set("max_tokens", n)

    def temperature(self, value: float) -> AgentBuilder:
        """Sampling temperature (default 0.7)."""
        return self._set("temperature", value)

    def verbose(self, on: bool = True) -> AgentBuilder:
        """Log each event of the agent (``footprint.orchestration`` logger)."""
        return self._set("verbose", on)

    def user_id(self, user_id: str) -> AgentBuilder:
        """The user the agent works for (dynamic prompts load this user's facts)."""
        return self._set("user_id", user_id)

    def memory(
        self, facts: FactStore | None = None, *, custom_instructions: Sequence[str] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> AgentBuilder:
        """Where dynamic prompts get the user's facts, custom instructions and the time from."""
        self._memory = MemoryOptions(facts=facts, custom_instructions=custom_instructions, clock=clock)
        return self

    def dynamic_prompts(self, on: bool = True) -> AgentBuilder:
        """Compose the system prompt with the user's facts and the time on every execution."""
        return self._set("dynamic_prompts", on)

    def recorder(self, recorder: Recorder) -> AgentBuilder:
        """Record every execution as a run."""
        return self._set("recorder", recorder)

    def session(self, session_id: str) -> AgentBuilder:
        """The session the runs are recorded under."""
        return self._set("session_id", session_id)

    def build(self) -> AgentOrchestrator:
        """The orchestrator; an :class:`AgentConfigError` names every required setting that is missing."""
        missing = [key for key in REQUIRED if self._settings.get(key) is None or self._settings.get(key) == ""]
        if missing:
            calls = ", ".join(f".{_SETTERS[k]}(...)" for k in missing)
            raise AgentConfigError(f"cannot build agent {self._settings.get('name') or '(unnamed)'}: missing "
                                   f"{', '.join(missing)} (set with {calls})")
        config = AgentConfig(**self._settings, tools=list(self._tools), memory_options=self._memory)
        return AgentOrchestrator(config)


def create_agent() -> AgentBuilder:
    """A new :class:`AgentBuilder`."""
    return AgentBuilder()

"""The demo: a personal assistant with a calendar tool, one of whose answers is wrong.

The scenario lives in ``agent/demo/personal_assistant.json``: Maya's stored profile still says
she lives in Berlin; in the first turn she tells the assistant she moved to Lisbon; in the second
the assistant suggests meeting "near your home in Berlin". `footprint why` on that answer walks
back to the stale memory fact and names its key.
"""

from ._run import DemoResult, run_demo
from ._scenario import (
    DEMO_SESSION_PREFIX,
    Scenario,
    build_demo_agent,
    check_availability,
    default_provider,
    demo_registry,
    load_scenario,
)

__all__ = [
    "DEMO_SESSION_PREFIX",
    "DemoResult",
    "Scenario",
    "build_demo_agent",
    "check_availability",
    "default_provider",
    "demo_registry",
    "load_scenario",
    "run_demo",
]

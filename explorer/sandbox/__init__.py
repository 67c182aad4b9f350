"""The persona sandbox: saved agents to create, chat with, edit and delete, kept in the store."""

from ._chat import ChatLine, SandboxChat, default_provider
from ._kv import KeyValue
from ._personas import FIELDS, Persona, PersonaStore
from ._tools import check_availability, sandbox_registry, sandbox_tools

__all__ = [
    "FIELDS",
    "ChatLine",
    "KeyValue",
    "Persona",
    "PersonaStore",
    "SandboxChat",
    "check_availability",
    "default_provider",
    "sandbox_registry",
    "sandbox_tools",
]

"""Test-wide settings: no test reaches a real model."""

from __future__ import annotations

from agent.providers import block_real_models

block_real_models(True)

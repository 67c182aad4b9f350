"""footprint's pytest plugin (registered by entry point): blocks real model requests in tests.

Fixtures for stores, recorders, test models and the replay provider are added here.
"""

from __future__ import annotations

"""The HTTP host (an ASGI app with an OpenAPI spec) and the read API for recordings."""

from ._app import create_app

__all__ = ["create_app"]

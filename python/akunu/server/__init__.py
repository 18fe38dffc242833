"""akunu-serve: an OpenAI-compatible HTTP server (``pip install 'akunu[server]'``)."""

from .app import ServerLimits, create_app

__all__ = ["create_app", "ServerLimits"]

"""The HTTP API: RAGFlow's agent routes and the compile-and-run routes (`create_app`)."""
from server.app import create_app
from server.config import ServerConfig

__all__ = ["create_app", "ServerConfig"]

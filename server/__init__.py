"""The HTTP API: RAGFlow's agent routes and the compile-and-run routes.

`server.app.create_app(ServerConfig(...))` builds the FastAPI app; `server.cli` holds the `serve` and
`tokens` commands. Nothing is imported here, so the command line reaches `server.cli` without
loading FastAPI.
"""

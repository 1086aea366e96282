"""The HTTP API: RAGFlow's agent routes and the compile-and-run routes.

`canvas2graph.server.app.create_app(ServerConfig(...))` builds the FastAPI app; `canvas2graph.cli.serve` holds the `serve` and
`tokens` commands. Nothing is imported here, so the command line reaches `canvas2graph.cli.serve` without
loading FastAPI.
"""

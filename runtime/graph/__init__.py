"""The graph kernel: what the builder and every node share while a turn runs.

`state` declares the channels, `values` reads and writes component outputs and references, `turn`
starts and finishes a turn, `calls` records model calls, `bridge` gives async nodes their sync twin,
and `event_order` keeps a batch's events in RAGFlow's order. Nothing here imports a node or the compiler.
"""

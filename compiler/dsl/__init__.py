"""The DSL's language: what a canvas says, before anything is planned or run.

`load` reads JSON into `CanvasDSL` (`model`: its entries, and `CanvasInfo`, what nodes may ask about the
rest of the canvas), `legacy` rewrites canvases of RAGFlow v0.19 and before, `refs` parses `{...}`
references into templates once, and `diagnostics` collects what is wrong with it. The node families
read this language; the planner above them (`canvas2graph.compiler`) puts it together.
"""

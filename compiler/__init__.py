"""canvas2graph's compiler: RAGFlow DSL -> checked plan -> LangGraph graph.

    from canvas2graph.compiler.canvas import compile_dsl, diagnose
    compiled = compile_dsl(text_or_dict)        # raises CompileError with diagnostics
    graph = compiled.graph(checkpointer)        # a compiled LangGraph, cached per checkpointer

`dsl/` is the language the node families read (references, entries, diagnostics), below the nodes;
this folder's modules (`plan`, `check`, `build`, `export`, `picture`, `python_writer`) sit above them.
This `__init__` imports nothing, so a node reading `canvas2graph.compiler.dsl.refs` never loads the planner.
"""

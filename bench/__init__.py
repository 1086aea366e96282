"""Benchmarks for canvas2graph: compile time and per-node run overhead versus hand-written LangGraph.

Run `python -m bench.run` (or `python bench/run.py`) from the repository root; see docs/performance.md.
"""

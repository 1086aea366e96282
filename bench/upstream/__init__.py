"""Small reproducers of costs that lie in LangGraph, langchain-core or langgraph-checkpoint-sqlite
themselves, each runnable alone (`python -m bench.upstream.NAME`) and small enough to attach to an
upstream issue. docs/performance.md ("Findings for upstream") gives the figures."""

"""RAGFlow's ingestion-pipeline components (rag/flow): one module per family, each registering its
components in `canvas2graph.nodes.registry.PIPELINE_REGISTRY` when imported (here, all at once)."""
from canvas2graph.nodes.pipeline import file, parser, token_chunker, title_chunker, extractor, tokenizer, compiler  # noqa: F401

"""RAGFlow's ingestion-pipeline components (rag/flow): one module per family, each registering its
components in `nodes.registry.PIPELINE_REGISTRY` when imported (here, all at once)."""
from nodes.pipeline import file, parser, token_chunker, title_chunker, extractor, tokenizer  # noqa: F401

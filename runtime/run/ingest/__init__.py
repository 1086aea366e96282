"""Ingestion: RAGFlow's pipeline DSLs run over files into a dataset (`canvas2graph ingest`)."""

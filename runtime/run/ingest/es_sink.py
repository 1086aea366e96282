"""Ingested chunks into Elasticsearch, in RAGFlow's index layout, so RAGFlow's Retrieval and ours find them.

RAGFlow keeps a tenant's chunks in the index `ragflow_<tenant>` (created with its conf/mapping.json,
shipped here as data/ragflow_es_mapping.json), one document per chunk with the chunk's id as `_id` and
the fields the pipeline wrote (`kb_id`, `doc_id`, `docnm_kwd`, `content_with_weight`, `content_ltks`,
`q_<dims>_vec`, ...). A document's chunks are replaced as a whole: deleted by `doc_id`, then written in
one bulk request. RAGFlow records a document's content hash in its MySQL database, which canvas2graph
does not have: the hash goes into each chunk as `ingest_hash_kwd` (a keyword under the mapping's
dynamic templates, ignored by RAGFlow), which is how an unchanged file is recognised.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from canvas2graph.runtime.services.retrieval.protocol import RetrievalError

MAPPING = Path(__file__).parent / "data" / "ragflow_es_mapping.json"
HASH_FIELD = "ingest_hash_kwd"


class ElasticsearchSink:
    """The store interface `Ingestor` writes through (`ensure_dataset`, `document_hash`, `put_document`),
    on an `ElasticsearchBackend`'s client, for datasets of one tenant."""

    def __init__(self, backend, tenant: str):
        if not tenant:
            raise RetrievalError("writing to Elasticsearch needs the dataset's tenant (its index is "
                                 "ragflow_<tenant>): give --tenant, or set it in the retrieval config")
        self.backend = backend
        self.es = backend.es
        self.index = f"ragflow_{tenant}"
        self.models = backend.models

    def describe(self) -> str:
        return f"{self.backend.describe()} (index {self.index})"

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def _call(self, what: str, fn, **kwargs) -> Any:
        return await self.backend._call(what, self.index, fn, **kwargs)

    async def ensure_dataset(self, kb_id: str, embd_id: str | None = None) -> None:
        exists = await self._call("index check", self.es.indices.exists, index=self.index)
        if not exists:
            mapping = json.loads(MAPPING.read_text(encoding="utf-8"))
            await self._call("index creation", self.es.indices.create, index=self.index, **mapping)

    async def document_hash(self, doc_id: str) -> str | None:
        body = {"size": 1, "_source": [HASH_FIELD], "query": {"term": {"doc_id": doc_id}}}
        found = await self._call("hash lookup", self.es.search, index=self.index, body=body)
        hits = (found.body if hasattr(found, "body") else found).get("hits", {}).get("hits", [])
        return hits[0]["_source"].get(HASH_FIELD) if hits else None

    async def put_document(self, *, kb_id: str, doc_id: str, name: str, source: str, content_hash: str,
                           chunks: list[dict], vectors: list | None = None, meta_fields: dict | None = None) -> None:
        await self._call("delete", self.es.delete_by_query, index=self.index, refresh=True, conflicts="proceed",
                         body={"query": {"term": {"doc_id": doc_id}}})
        operations: list[dict] = []
        for i, fields in enumerate(chunks):
            doc = {**fields, HASH_FIELD: content_hash}
            vector = vectors[i] if vectors else None
            if vector is not None:
                doc[f"q_{len(vector)}_vec"] = list(vector)
            operations += [{"index": {"_index": self.index, "_id": fields["id"]}}, doc]
        if operations:
            reply = await self._call("bulk", self.es.bulk, operations=operations, refresh=True)
            body = reply.body if hasattr(reply, "body") else reply
            if body.get("errors"):
                first = next((item for item in body.get("items", []) if "error" in next(iter(item.values()))), {})
                raise RetrievalError(f"{self.describe()} refused chunks of {name}: {json.dumps(first)[:300]}")

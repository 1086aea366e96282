"""Run a compiled pipeline over files into a dataset: one checkpointed LangGraph run per file.

Each file's run is a LangGraph thread named after the dataset, the document and the file's and
pipeline's content (`ingest:<kb>:<doc_id>:<hash>`), so:
- a file whose stored hash matches is unchanged and skipped (nothing runs);
- a run that was killed continues from its last finished component when ingestion starts again
  (`astream(None, config)` on the thread), and a run that finished but was not stored is stored;
- the first error stops that file (RAGFlow's Pipeline), and the others go on; a failed file is tried
  afresh the next time;
- a stored file's thread is deleted: the store's hash marks it done, and its checkpoints (every
  component's outputs, the parsed document among them) would only grow the database.
Events (`ingest_started`, `file_started`, `progress`, `file_finished` with its chunks and pages, `file_skipped`,
`file_failed`, `ingest_finished`) go to `on_event` as they happen; `progress` carries RAGFlow's per-component
progress: component id, progress in [0, 1] (-1 for an error), message and elapsed time.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from canvas2graph.runtime.run.ingest.chunks import embed_texts, payload_chunks, stored_chunks
from canvas2graph.runtime.services.retrieval.indexing import doc_id_for

OnEvent = Callable[[dict[str, Any]], Awaitable[None] | None]


async def _call(fn, *args, **kwargs):
    """A store's method: awaited when it is async (Elasticsearch), else run in a thread (SQLite)."""
    if asyncio.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


class IngestError(Exception):
    """A problem with what ingestion was asked to do (no files, a store it cannot write)."""


@dataclass
class FileItem:
    path: Path                  # where the bytes are
    name: str                   # the document's name in the dataset (relative path within a folder)


@dataclass
class IngestReport:
    files: int = 0
    ingested: int = 0
    unchanged: int = 0
    failed: int = 0
    chunks: int = 0
    pages: int = 0
    seconds: float = 0.0
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("files", "ingested", "unchanged", "failed", "chunks", "pages",
                                              "seconds", "errors")}


def expand(paths: Iterable[str]) -> list[FileItem]:
    """Files given and every file under folders given (by relative path), hidden files left out."""
    items: list[FileItem] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p)
                if f.is_file() and not any(part.startswith(".") for part in rel.parts):
                    items.append(FileItem(f, rel.as_posix()))
        elif p.is_file():
            items.append(FileItem(p, p.name))
        else:
            raise IngestError(f"{raw}: no such file or folder")
    if not items:
        raise IngestError("no files to ingest")
    return items


class Ingestor:
    """Ingests files with one compiled pipeline into one dataset of a store: the embedded store, or
    Elasticsearch through `canvas2graph.runtime.run.ingest.es_sink.ElasticsearchSink`."""

    def __init__(self, compiled, saver, store, context, *, kb_id: str, embd_id: str | None = None,
                 embedder=None, on_event: OnEvent | None = None):
        if compiled.kind != "pipeline":
            raise IngestError("the DSL is an agent, not an ingestion pipeline (a File -> Parser -> ... canvas)")
        self.compiled = compiled
        self.graph = compiled.graph(saver)
        self.store = store
        self.context = context
        self.kb_id = kb_id
        self.embd_id = embd_id
        self.embedder = embedder
        self.on_event = on_event
        if embedder is not None:
            context.services = {**context.services, "ingest_embedder": embedder}

    async def _emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            result = self.on_event(event)
            if asyncio.iscoroutine(result):
                await result

    async def run(self, items: list[FileItem]) -> IngestReport:
        from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
        report = IngestReport(files=len(items))
        started = time.perf_counter()
        await _call(self.store.ensure_dataset, self.kb_id, self.embd_id)
        tokenizer = await asyncio.to_thread(get_tokenizer)
        await self._emit({"event": "ingest_started", "data": {"kb_id": self.kb_id, "files": len(items)}})
        for item in items:
            await self._one(item, report, tokenizer)
        report.seconds = time.perf_counter() - started
        await self._emit({"event": "ingest_finished", "data": report.to_dict()})
        return report

    def content_hash(self, data: bytes) -> str:
        """The file's content and the pipeline's: either changing means ingesting the file again."""
        return hashlib.sha256(data).hexdigest() + ":" + self.compiled.digest[:16]

    def thread_config(self, doc_id: str, digest: str) -> dict[str, Any]:
        """The LangGraph thread of one file's run: the same file and pipeline continue the same thread."""
        return {"configurable": {"thread_id": f"ingest:{self.kb_id}:{doc_id}:{digest[:24]}"},
                "recursion_limit": len(self.compiled.plan.nodes) + 10}

    async def _one(self, item: FileItem, report: IngestReport, tokenizer) -> None:
        try:
            data = item.path.read_bytes()
        except OSError as e:
            return await self._failed(item, report, f"cannot read {item.path}: {e.strerror}")
        digest = self.content_hash(data)
        doc_id = doc_id_for(self.kb_id, item.name)
        base = {"name": item.name, "doc_id": doc_id}
        if await _call(self.store.document_hash, doc_id) == digest:
            report.unchanged += 1
            return await self._emit({"event": "file_skipped", "data": {**base, "reason": "unchanged"}})
        config = self.thread_config(doc_id, digest)
        snapshot = await self.graph.aget_state(config)
        if snapshot.values.get("error") and not snapshot.next:      # it failed last time: try it afresh
            await self.graph.checkpointer.adelete_thread(config["configurable"]["thread_id"])
            snapshot = await self.graph.aget_state(config)
        resumed = bool(snapshot.values) and bool(snapshot.next)
        await self._emit({"event": "file_started", "data": {**base, "resumed": resumed}})
        if not snapshot.values or snapshot.next:
            file = {"name": item.name, "path": str(item.path.resolve()), "size": len(data), "sha256": digest[:64],
                        "doc_id": doc_id}
            graph_input = None if resumed else {"file": file, "kb": {"id": self.kb_id, "embd_id": self.embd_id}}
            async for chunk in self.graph.astream(graph_input, config, context=self.context, stream_mode="custom"):
                if isinstance(chunk, dict) and chunk.get("event") == "progress":    # models write their own items
                    await self._emit({**chunk, "data": {**chunk["data"], "name": item.name}})
            snapshot = await self.graph.aget_state(config)
        values = snapshot.values
        if values.get("error"):
            return await self._failed(item, report, f"{values.get('last')}: {values['error']}")
        last = (values.get("outputs") or {}).get(values.get("last") or "", {})
        try:
            count = await self._store(item, doc_id, digest, last, tokenizer)
        except Exception as e:           # the store refused (another embedding model, a full disk)
            return await self._failed(item, report, f"storing: {e}")
        pages = int(self._pages(values))
        report.ingested += 1
        report.chunks += count
        report.pages += pages
        await self.graph.checkpointer.adelete_thread(config["configurable"]["thread_id"])
        await self._emit({"event": "file_finished", "data": {**base, "chunks": count, "pages": pages}})

    @staticmethod
    def _pages(values: dict[str, Any]) -> int:
        """Pages as the parser counted them (PDF); a document without pages counts as one."""
        for outputs in (values.get("outputs") or {}).values():
            if isinstance(outputs.get("pages"), int):
                return outputs["pages"]
        return 1

    async def _store(self, item: FileItem, doc_id: str, digest: str, last: dict, tokenizer) -> int:
        chunks = payload_chunks(last)
        if chunks and self.embedder is not None and not any(k.startswith("q_") and k.endswith("_vec")
                                                             for c in chunks for k in c):
            vectors = await self.embedder.embed_documents(embed_texts(chunks))
            for c, v in zip(chunks, vectors):
                c[f"q_{len(v)}_vec"] = v
        # a Compiler's structure rows (entities, relations) go to the same index, as RAGFlow's do
        rows = [dict(r) for r in last.get("structure") or [] if isinstance(r, dict)]
        chunks += rows
        fields, vectors, metadata = await asyncio.to_thread(
            stored_chunks, chunks, doc_id=doc_id, kb_id=self.kb_id, name=item.name, tokenizer=tokenizer)
        has_vectors = any(v is not None for v in vectors)
        await _call(self.store.put_document, kb_id=self.kb_id, doc_id=doc_id, name=item.name,
                                source=str(item.path.resolve()), content_hash=digest, chunks=fields,
                                vectors=vectors if has_vectors else None, meta_fields=metadata)
        return len(fields) - len(rows)

    async def _failed(self, item: FileItem, report: IngestReport, message: str) -> None:
        report.failed += 1
        report.errors.append({"name": item.name, "error": message})
        await self._emit({"event": "file_failed", "data": {"name": item.name, "error": message}})

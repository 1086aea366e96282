"""Ingestion over HTTP: `POST /api/v1/datasets/{dataset_id}/ingest` runs a pipeline DSL over uploaded files.

The request is multipart: the pipeline DSL as the `dsl` field (JSON text), the documents as `file`
parts (stored in the tenant's upload store under its upload limits, as agent uploads are), and an
optional `embd_id` (the dataset's embedding model). The reply is a stream of server-sent events, one
`data: {"event", "data"}` line per event, as they happen: `ingest_started`, then for each file
`file_started`, RAGFlow's per-component `progress` (component id, progress, message, elapsed time),
and `file_finished`, `file_skipped` (unchanged) or `file_failed`; `ingest_finished` with the totals
last. The chunks go to the server's embedded retrieval store as the tenant's dataset `dataset_id`
(kept apart from other tenants' datasets of that name: runtime/services/retrieval/tenants.py), where the tenant's
agents' Retrieval finds them; each file's run is checkpointed in the server's database, so the same request
after a restart skips finished files and continues the others.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from canvas2graph.runtime.services.retrieval.tenants import scoped_id
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ApiError, RetCode, argument_error
from canvas2graph.server.deps import parse_dsl
from canvas2graph.server.routes.files import FILE_NAME_BYTES
from canvas2graph.server.turns import check, diagnostics_error
from canvas2graph.server.uploads import Incoming, store_uploads

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])
DATASET_ID = r"^[A-Za-z0-9._:-]{1,128}$"


async def _form(request: Request, most: int) -> tuple[str, str | None, list[Incoming]]:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "multipart/form-data":
        raise argument_error("send multipart/form-data: the pipeline DSL in `dsl`, the documents in `file`")
    try:
        form = await request.form(max_files=most + 1, max_fields=100)
    except Exception as e:      # noqa: BLE001 - starlette's parser: a malformed body, or too many parts
        raise argument_error(f"the multipart body cannot be read: {getattr(e, 'detail', None) or e}")
    dsl = form.get("dsl")
    if not isinstance(dsl, str) or not dsl.strip():
        raise argument_error("`dsl` is missing: the pipeline DSL as JSON text")
    embd_id = form.get("embd_id")
    files = []
    for part in (v for k, v in form.multi_items() if k == "file" and not isinstance(v, str)):
        name = part.filename or "file"
        if len(name.encode("utf-8")) > FILE_NAME_BYTES:
            raise argument_error(f"the file name {name[:40]}... is longer than {FILE_NAME_BYTES} bytes")
        files.append(Incoming(name, await part.read(), part.content_type))
    if not files:
        raise argument_error("no documents: send them as `file` parts")
    return dsl, embd_id if isinstance(embd_id, str) and embd_id else None, files


@router.post("/{dataset_id}/ingest", summary="Run an ingestion pipeline DSL over uploaded documents into a "
                                             "dataset: server-sent progress events")
async def ingest(request: Request, dataset_id: str, tenant_id: str = Depends(tenant)):
    import re
    if not re.match(DATASET_ID, dataset_id):
        raise argument_error("a dataset id is 1-128 letters, digits, '.', '_', ':' or '-'")
    limits = request.app.state.upload_policy.of(tenant_id)
    dsl, embd_id, files = await _form(request, limits.max_files)
    source = parse_dsl(dsl, request)
    verdict = await check(request, source)
    if not verdict.ok:
        raise diagnostics_error(verdict.diagnostics, "the pipeline")
    from canvas2graph.server.compiling import compile_in_thread
    compiled = await compile_in_thread(source)
    if compiled.kind != "pipeline":
        raise argument_error("`dsl` is an agent canvas; a dataset is built by an ingestion pipeline "
                             "(File -> Parser -> ... -> Tokenizer)")
    entries = await store_uploads(request.app.state.files, tenant_id, files, limits)
    environment = request.app.state.run_services.environment
    store = environment.retrieval_backend()
    from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
    if not isinstance(store, EmbeddedBackend):
        raise ApiError(RetCode.OPERATING_ERROR, f"ingestion writes to the embedded store; this server's retrieval "
                       f"backend is {store.describe()}", status=501)
    embedder = store.models.embedder(embd_id) if embd_id else None
    items = _items(request, tenant_id, entries)
    return StreamingResponse(_events(compiled, request, tenant_id, store, environment, dataset_id, embd_id, embedder, items),
                             media_type="text/event-stream")


def _items(request: Request, tenant_id: str, entries: list[dict]):
    from canvas2graph.runtime.run.ingest.run import FileItem
    out = []
    for entry in entries:
        path = request.app.state.files.path(entry["id"], tenant_id)
        out.append(FileItem(path, entry.get("name") or entry["id"]))
    return out


async def _events(compiled, request, tenant_id, store, environment, dataset_id, embd_id, embedder, items) -> AsyncIterator[bytes]:
    from canvas2graph.runtime.run.ingest.run import Ingestor
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    context = environment.context(f"ingest:{dataset_id}")
    # the tenant's own dataset of that name (runtime/services/retrieval/tenants.py): its documents, chunks and threads
    kb_id = scoped_id(tenant_id, dataset_id)

    def emit(event: dict[str, Any]):
        if event.get("event") == "ingest_started":      # the client's name for the dataset, not the store's
            event = {**event, "data": {**event["data"], "kb_id": dataset_id}}
        return queue.put(event)
    ingestor = Ingestor(compiled, request.app.state.store.checkpointer, store, context, kb_id=kb_id,
                        embd_id=embd_id, embedder=embedder, on_event=emit)

    async def work() -> None:
        try:
            await ingestor.run(items)
        except Exception as e:              # the store refused the dataset (another embedding model, say)
            await queue.put({"event": "ingest_failed", "data": {"error": str(e)}})
        finally:
            await queue.put(None)
    task = asyncio.create_task(work())
    try:
        while (event := await queue.get()) is not None:
            yield b"data:" + json.dumps(event, ensure_ascii=False, default=str).encode() + b"\n\n"
    finally:
        if not task.done():         # the client left: the files' checkpoints keep what was done
            task.cancel()

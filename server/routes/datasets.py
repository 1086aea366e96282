"""Ingestion over HTTP: `POST /api/v1/datasets/{dataset_id}/ingest` runs a pipeline DSL over uploaded files.

The request is multipart: the pipeline DSL as the `dsl` field (JSON text), the documents as `file`
parts (stored in the tenant's upload store under its upload limits, as agent uploads are), and an
optional `embd_id` (the dataset's embedding model). The reply is a stream of server-sent events, one
`data: {"event", "data"}` line per event, as they happen: `ingest_started` (with the run's `ingest_id`), then for
each file `file_started`, RAGFlow's per-component `progress` (component id, progress, message, elapsed time),
and `file_finished`, `file_skipped` (unchanged) or `file_failed`; `ingest_finished` with the totals
last (`ingest_failed` or `ingest_cancelled` instead when the run failed or was cancelled). The chunks go to the
server's embedded retrieval store as the tenant's dataset `dataset_id`
(kept apart from other tenants' datasets of that name: runtime/services/retrieval/tenants.py), where the tenant's
agents' Retrieval finds them; each file's run is checkpointed in the server's database, so the same request
after a restart skips finished files and continues the others.

The run is a background job (server/backend/background/ingest_runs.py): any worker runs it, another one takes it over
when its worker dies, and the stream is read from the event log, so neither the client leaving nor this process
dying stops it. Any API process answers for it:
- `GET /api/v1/datasets/{dataset_id}/ingestions`: the dataset's runs, newest first (`running`, `finished` with its
  `report`, `failed` with its `error`, `cancelled`);
- `GET /api/v1/datasets/{dataset_id}/ingestions/{id}`: one;
- `GET /api/v1/datasets/{dataset_id}/ingestions/{id}/events`: its events from the first, as the POST streams them;
- `POST /api/v1/datasets/{dataset_id}/ingestions/{id}/cancel`: stop it (files already stored stay).
"""
from __future__ import annotations

import json
import re
from typing import AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ApiError, RetCode, argument_error, not_found, ok
from canvas2graph.server.deps import parse_dsl
from canvas2graph.server.routes.files import FILE_NAME_BYTES
from canvas2graph.server.routes.traces import http_status
from canvas2graph.server.turns import check, diagnostics_error
from canvas2graph.server.uploads import Incoming, store_uploads

router = APIRouter(prefix="/api/v1/datasets", tags=["datasets"])
DATASET_ID = r"^[A-Za-z0-9._:-]{1,128}$"
HTTP_STATUS = [Depends(http_status)]     # the runs' routes answer 404 for another tenant's run, as the UI expects


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
    _dataset(dataset_id)
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
    if embd_id:
        store.models.embedder(embd_id)      # an embedding model the server cannot make is refused now, not in the job
    run = await request.app.state.background.ingestions.queue(tenant_id, dataset_id, dsl=source, entries=entries,
                                                              embd_id=embd_id)
    return _sse(request, run.id)


def _sse(request: Request, ingestion_id: str) -> StreamingResponse:
    """The run's events as server-sent events, read from the event log (whichever worker runs it); a client that
    leaves stops reading, not the run."""
    async def frames() -> AsyncIterator[bytes]:
        async for event in request.app.state.background.ingestions.stream(ingestion_id):
            yield b"data:" + json.dumps(event, ensure_ascii=False, default=str).encode() + b"\n\n"
    return StreamingResponse(frames(), media_type="text/event-stream", headers={"X-Ingestion-Id": ingestion_id})


def _dataset(dataset_id: str) -> str:
    if not re.match(DATASET_ID, dataset_id):
        raise argument_error("a dataset id is 1-128 letters, digits, '.', '_', ':' or '-'")
    return dataset_id


async def _ingestion(request: Request, tenant_id: str, dataset_id: str, ingestion_id: str):
    found = await request.app.state.background.ingestions.store.get(tenant_id, _dataset(dataset_id), ingestion_id)
    if found is None:
        raise not_found(f"ingestion {ingestion_id} of dataset {dataset_id}")
    return found


@router.get("/{dataset_id}/ingestions", summary="The dataset's ingestion runs, newest first",
            dependencies=HTTP_STATUS)
async def list_ingestions(request: Request, dataset_id: str, tenant_id: str = Depends(tenant)):
    found = await request.app.state.background.ingestions.store.list(tenant_id, _dataset(dataset_id))
    return ok([run.view() for run in found])


@router.get("/{dataset_id}/ingestions/{ingestion_id}", summary="One ingestion run: its status and totals",
            dependencies=HTTP_STATUS)
async def get_ingestion(request: Request, dataset_id: str, ingestion_id: str, tenant_id: str = Depends(tenant)):
    return ok((await _ingestion(request, tenant_id, dataset_id, ingestion_id)).view())


@router.get("/{dataset_id}/ingestions/{ingestion_id}/events",
            summary="An ingestion run's events from its first, as server-sent events, until it ends",
            dependencies=HTTP_STATUS)
async def follow_ingestion(request: Request, dataset_id: str, ingestion_id: str, tenant_id: str = Depends(tenant)):
    return _sse(request, (await _ingestion(request, tenant_id, dataset_id, ingestion_id)).id)


@router.post("/{dataset_id}/ingestions/{ingestion_id}/cancel",
             summary="Stop a running ingestion, wherever it runs (the files already stored stay)",
             dependencies=HTTP_STATUS)
async def cancel_ingestion(request: Request, dataset_id: str, ingestion_id: str, tenant_id: str = Depends(tenant)):
    found = await _ingestion(request, tenant_id, dataset_id, ingestion_id)
    if await request.app.state.background.ingestions.cancel(found.id, tenant_id) is None:
        raise argument_error(f"ingestion {found.id} is {found.status}: only a running ingestion can be cancelled")
    return ok(True)

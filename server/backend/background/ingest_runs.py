"""Ingestion runs as background jobs (`c2g.job("ingest", ingestion_id)`): the pipeline runs on any worker, its events
go to the event log under the run's id, and any API process streams them (`stream`), so a client's stream does not
depend on where the run is, and neither the client leaving nor the API process dying stops it.

A worker that takes a run over resumes it from its log and from the Ingestor's own checkpoints
(runtime/run/ingest/run.py): the files whose outcome is logged are not run again, the file that was running
continues from its last finished component (`file_started` with `resumed`), and `ingest_finished` gives the totals
of every attempt. The runs of one dataset take turns (a lock per dataset on the engine): two requests over the same
files never run one file's thread at once.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.ingest.run import FileItem, Ingestor
from canvas2graph.runtime.services.retrieval.tenants import scoped_id
from canvas2graph.server.backend.background.handler import RunFailed
from canvas2graph.server.backend.background.ingest_store import Ingestion, IngestionStore
from canvas2graph.server.backend.background.runs import RunRow
from canvas2graph.server.backend.jobs.engine import EVENTS_KEPT_SECONDS, JobEngine
from canvas2graph.server.backend.jobs.event_log import EventLog
from canvas2graph.server.backend.jobs.wire import TURN_EVENT, turn_event
from canvas2graph.server.backend.store import now_ms

__all__ = ["INGEST", "IngestRuns"]

INGEST = "ingest"
FILE_OUTCOMES = ("file_finished", "file_skipped", "file_failed")


@dataclass
class _Fold:
    """What a run's logged events add up to: whether it started, each file's outcome, its end."""
    started: bool = False
    outcomes: dict[str, dict] = field(default_factory=dict)        # file name -> its outcome event
    finished: dict | None = None                                   # the ingest_finished totals

    def add(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "ingest_started":
            self.started = True
        elif kind in FILE_OUTCOMES:
            self.outcomes[(event.get("data") or {}).get("name", "")] = event
        elif kind == "ingest_finished":
            self.finished = event.get("data")

    def totals(self, files: int, seconds: float) -> dict[str, Any]:
        """`IngestReport.to_dict()` over every attempt's files."""
        data = [(e["event"], e.get("data") or {}) for e in self.outcomes.values()]
        done = [d for kind, d in data if kind == "file_finished"]
        return {"files": files, "ingested": len(done), "unchanged": sum(k == "file_skipped" for k, _ in data),
                "failed": sum(k == "file_failed" for k, _ in data), "chunks": sum(d.get("chunks") or 0 for d in done),
                "pages": sum(d.get("pages") or 0 for d in done), "seconds": seconds,
                "errors": [{"name": d.get("name"), "error": d.get("error")} for k, d in data if k == "file_failed"]}


class IngestRuns:
    """The `ingest` kind: queue a run (`queue`), follow it (`stream`), cancel it (`cancel`); what a worker does."""

    kind = INGEST

    def __init__(self, store: IngestionStore, engine: JobEngine, events: EventLog, checkpointer, files, environment,
                 owner: str):
        self.store, self.table, self.engine, self.events = store, store.runs, engine, events
        self.checkpointer, self.files, self.environment, self.owner = checkpointer, files, environment, owner

    # --- from an API process ----------------------------------------------------------------------
    async def queue(self, tenant: str, dataset_id: str, *, dsl: dict, entries: list[dict],
                    embd_id: str | None) -> Ingestion:
        """Record an ingestion of the uploaded files `entries` (the file store's entries) and queue its job."""
        request = {"dsl": dsl, "dataset_id": dataset_id, "embd_id": embd_id,
                   "files": [{"id": e["id"], "name": e.get("name") or e["id"]} for e in entries]}
        found = await self.store.create(tenant, dataset_id, request, len(entries))
        await self.table.set_job(found.id, await self.defer(found.id))
        return found

    async def cancel(self, ingestion_id: str, tenant: str) -> str | None:
        """"cancelled", "cancelling" (its worker stops it within a second) or None (it is not running)."""
        state = await self.table.request_cancel(ingestion_id, tenant)
        if state == "cancelled":        # no worker had it: its readers are told here
            await self._log_end("cancelled", "cancelled on request", ingestion_id)
        return state

    async def stream(self, ingestion_id: str) -> AsyncIterator[dict]:
        """The run's events from its first, as clients see them, until it ends (from any process)."""
        told = False

        async def settled() -> dict | None:
            found = await self.store.find(ingestion_id)
            if found is None:
                return turn_event("end", status="failed", error="the ingestion was deleted")
            return None if found.status == "running" else turn_event("end", status=found.status, error=found.error)

        async for batch in self.events.follow(ingestion_id, settled=settled):
            for event in batch:
                if event.get("event") != TURN_EVENT:
                    told = told or event.get("event") in ("ingest_finished", "ingest_failed")
                    yield event
                elif event.get("kind") == "end" and not told:
                    ending = _ending(event)
                    if ending is not None:
                        yield ending

    # --- the kind, for the handler and the sweep --------------------------------------------------
    async def defer(self, run_id: str) -> int:
        found = await self.store.find(run_id)
        # one dataset's runs take turns: two runs over one file would run its checkpointed thread at once
        lock = f"c2g-ingest:{scoped_id(found.tenant, found.dataset_id)}" if found is not None else None
        return await self.engine.defer_job(INGEST, run_id, lock=lock)

    async def work(self, run: RunRow) -> dict[str, Any]:
        request = run.request or {}
        dataset_id, embd_id = request["dataset_id"], request.get("embd_id")
        compiled = await asyncio.to_thread(compile_dsl, request["dsl"])
        backend = self._backend()
        embedder = backend.models.embedder(embd_id) if embd_id else None
        items = [FileItem(self._path(f, run.tenant), f["name"]) for f in request["files"]]
        fold = _Fold()
        for event in await self.events.read_all(run.id):
            fold.add(event)
        if fold.finished is not None:   # it ended before its row could say so: only the row is left to end
            return {"report": json.dumps(fold.finished, ensure_ascii=False)}
        resumed = fold.started or bool(fold.outcomes)
        log = _Writer(self.events, run.id, await self.events.next_seq(run.id))
        await log.put(turn_event("attempt", attempt=run.attempts + 1, owner=self.owner))

        async def emit(event: dict) -> None:
            kind = event.get("event")
            if kind == "ingest_started":
                if fold.started:
                    return              # told once, by the first attempt
                # the client's name for the dataset, not the store's; the run's id, to follow or cancel it
                event = {**event, "data": {**event["data"], "kb_id": dataset_id, "ingest_id": run.id}}
            elif kind == "ingest_finished" and resumed:
                event = {**event, "data": fold.totals(len(items), (now_ms() - run.create_time) / 1000)}
            fold.add(event)
            await log.put(event)

        ingestor = Ingestor(compiled, self.checkpointer, backend, self.environment.context(f"ingest:{dataset_id}"),
                            kb_id=scoped_id(run.tenant, dataset_id), embd_id=embd_id, embedder=embedder, on_event=emit)
        try:
            await ingestor.run([item for item in items if item.name not in fold.outcomes])
        except Exception as e:          # the store refused the dataset (another embedding model, say)
            raise RunFailed(str(e) or type(e).__name__) from e
        return {"report": json.dumps(fold.finished, ensure_ascii=False)}

    async def ended(self, run: RunRow, status: str, error: str | None) -> None:
        await self._log_end(status, error, run.id)

    async def tidy(self) -> None:
        ids = await self.store.events_to_forget(now_ms() - int(EVENTS_KEPT_SECONDS * 1000))
        await self.events.forget(ids)
        await self.store.events_forgotten(ids)

    # --- helpers ----------------------------------------------------------------------------------
    async def _log_end(self, status: str, error: str | None, run_id: str) -> None:
        # after the row: a reader that sees the end finds the run ended
        end = turn_event("end", status=status, **({"error": error} if error else {}))
        await self.events.append(run_id, await self.events.next_seq(run_id), [end])

    def _backend(self):
        from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
        backend = self.environment.retrieval_backend()
        if not isinstance(backend, EmbeddedBackend):
            raise RunFailed(f"ingestion writes to the embedded store; this worker's retrieval backend is "
                            f"{backend.describe()}")
        return backend

    def _path(self, entry: dict, tenant: str) -> Path:
        # a file this worker's store lacks (a worker on another machine without the shared folder) fails that file,
        # saying so, as an unreadable file does
        return self.files.path(entry["id"], tenant) or Path(f"(upload {entry['id']} is not in this worker's file store)")


class _Writer:
    """Appends a run's events to the log one by one (a pipeline's events are few; each is kept as it happens)."""

    def __init__(self, events: EventLog, run_id: str, seq: int):
        self.events, self.run_id, self.seq = events, run_id, seq

    async def put(self, event: dict) -> None:
        self.seq = await self.events.append(self.run_id, self.seq, [event])


def _ending(end: dict) -> dict | None:
    """What a client is told of a run that ended without `ingest_finished` (failed, cancelled)."""
    status = end.get("status")
    if status == "cancelled":
        return {"event": "ingest_cancelled", "data": {"reason": end.get("error") or "cancelled"}}
    if status == "failed":
        return {"event": "ingest_failed", "data": {"error": end.get("error") or "the ingestion failed"}}
    return None

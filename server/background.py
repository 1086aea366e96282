"""Background runs other than turns (evaluations, ingestion) in a process of the server: `serve` and `canvas2graph
worker` both open them with `open_background`, so that every process that runs jobs has a handler for each kind and
every API process queues, lists, follows and cancels them the same way (server/backend/background/).
"""
from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

from canvas2graph.server.backend.agent_tests.eval_store import EvaluationStore
from canvas2graph.server.backend.background.evaluation_runs import EvaluationRuns
from canvas2graph.server.backend.background.handler import RunHandler
from canvas2graph.server.backend.background.ingest_runs import IngestRuns
from canvas2graph.server.backend.background.ingest_store import IngestionStore
from canvas2graph.server.backend.background.memory_extraction import KIND as MEMORY_KIND, MemoryExtraction
from canvas2graph.server.backend.background.sweep import Sweeper
from canvas2graph.runtime.services.memory.stores import open_memory_store
from canvas2graph.server.backend.jobs.process import JobProcess
from canvas2graph.server.services import RunServices

log = logging.getLogger("canvas2graph.background")


@dataclass
class Background:
    evaluations: EvaluationRuns
    ingestions: IngestRuns
    memory: Any = None              # the memory store (LangGraph's), which the memory API reads and writes
    extraction: MemoryExtraction | None = None      # queues the typed extraction of saved exchanges


@asynccontextmanager
async def open_background(jobs: JobProcess, services: RunServices) -> AsyncIterator[Background]:
    """Register the kinds' handlers with `jobs` (before its worker starts) and, in a process that runs a worker, sweep
    for runs whose job was lost: at once on the embedded engine (its jobs died with the last process), then every
    `SWEEP_SECONDS`."""
    evaluation_store, ingestion_store = EvaluationStore(jobs.store), IngestionStore(jobs.store)
    await evaluation_store.setup()
    await ingestion_store.setup()
    conversations = jobs.conversations
    background = Background(
        evaluations=EvaluationRuns(evaluation_store, jobs.engine, conversations.models, conversations.services),
        ingestions=IngestRuns(ingestion_store, jobs.engine, jobs.events, jobs.store.checkpointer, services.files,
                              services.environment, jobs.owner))
    kinds = [background.evaluations, background.ingestions]
    for kind in kinds:
        jobs.add_job_kind(kind.kind, RunHandler(kind, jobs.owner))
    sweeper = Sweeper(jobs.engine, kinds)
    async with open_memory_store(jobs.store.url, pool=getattr(jobs.store.db, "pool", None)) as memory:
        # every run of a canvas that names memories reaches them (RunServices), and the extraction of what its
        # Messages saved is queued after its turn and run by any worker
        services.memory = background.memory = memory
        extraction = background.extraction = MemoryExtraction(memory, jobs.engine, conversations.models,
                                                              services.memory_embedder)
        jobs.add_job_kind(MEMORY_KIND, extraction)
        if jobs.worker is not None:
            jobs.worker.after_turn.append(extraction.after_turn)
        if jobs.workers > 0:
            if not jobs.engine.postgres:
                recovered = await sweeper.sweep(starting=True)
                if recovered:
                    log.warning("queued again %d background run(s) a stopped process left running", recovered)
            sweeper.start()
            extraction.start()
        try:
            yield background
        finally:
            await sweeper.stop()
            await extraction.stop()
            services.memory = None

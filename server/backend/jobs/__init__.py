"""Turns as durable jobs (package `canvas2graph.server.backend.jobs`, in the hosted-agents layer, rank 7):
the job engine (`engine.py`, procrastinate), the event log a turn streams into (`event_log.py`, `wire.py`,
`publisher.py`), what a worker does with a turn (`turn_runs.py`, `rollback.py`), the upkeep that takes over
the turns of dead workers (`upkeep.py`) and what one process runs of it (`process.py`). See
docs/architecture.md, "Turns as jobs"."""

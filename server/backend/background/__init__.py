"""Background work other than turns, as durable jobs (package `canvas2graph.server.backend.background`, rank 7):
evaluations and ingestion runs are `c2g.job` jobs of the job engine (server/backend/jobs/), so any worker runs
them and another one takes them over when their worker dies.

`runs.py` is what every such run's row shares (its owner, lease, takeovers and cancel flag), `handler.py` the
job body that claims a run and stops it on a cancel or a stopping worker, `sweep.py` what queues again the runs
whose job was lost; `evaluation_runs.py` and `ingest_runs.py` (with `ingest_store.py`) are the two kinds.
See docs/architecture.md, "Background runs as jobs".
"""

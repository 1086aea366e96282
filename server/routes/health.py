"""Probes for a process supervisor and a load balancer: liveness and readiness (docs/deploy.md)."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

router = APIRouter(tags=["server"])


@router.get("/health", summary="Liveness: 200 once the database is open")
async def health():
    return {"code": 0, "data": {"status": "ok"}}


@router.get("/ready", summary="Readiness: 200 while the database answers (for a load balancer)")
async def ready(request: Request):
    """503 while the database does not answer: a load balancer sends requests elsewhere meanwhile. The answer
    counts this process's turn slots and the workers whose heartbeat is recent (0: queued turns wait)."""
    jobs = request.app.state.jobs
    try:
        await jobs.store.db.fetchall("SELECT 1 AS one", ())
        workers = await jobs.engine.workers_alive()
    except Exception as e:          # noqa: BLE001 - the database is away: take no requests meanwhile
        return JSONResponse({"code": 503, "message": f"the database does not answer ({type(e).__name__})"},
                            status_code=503)
    return {"code": 0, "data": {"status": "ok", "turn_slots": jobs.workers, "workers_alive": workers}}

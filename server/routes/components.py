"""The components an agent can hold, with the JSON schema of each one's params (for editors)."""
from __future__ import annotations

from fastapi import APIRouter, Depends

from canvas2graph.nodes.schemas import params_schemas
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ok

router = APIRouter(prefix="/api/v1", tags=["components"])


@router.get("/components", summary="Every component with the JSON schema of its params (what an editor's forms show)")
async def list_components(tenant_id: str = Depends(tenant)):
    return ok(params_schemas())

"""An agent's saved versions (RAGFlow's `/agents/{id}/versions` routes). How to restore one: README."""
from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import not_found, ok
from canvas2graph.server.deps import owned_agent, store
from canvas2graph.server.views import version_view

router = APIRouter(prefix="/api/v1", tags=["versions"])


@router.get("/agents/{agent_id}/versions", summary="An agent's versions, the most recently saved first (no DSLs)")
async def list_versions(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    versions = await store(request).list_versions(tenant_id, agent_id)
    return ok([version_view(v, full=False) for v in versions])


@router.get("/agents/{agent_id}/versions/{version_id}", summary="One version: its DSL, author and diagnostics")
async def get_version(request: Request, agent_id: str, version_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    version = await store(request).get_version(tenant_id, agent_id, version_id)
    if version is None:
        raise not_found(f"version {version_id} of agent {agent_id}")
    return ok(version_view(version))

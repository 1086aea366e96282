"""The agent templates canvas2graph ships (RAGFlow's `GET /agents/templates`)."""
from __future__ import annotations

from fastapi import APIRouter, Depends

from canvas2graph.server.backend.templates import template_view, templates
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ok

router = APIRouter(prefix="/api/v1", tags=["templates"])


@router.get("/agents/templates", summary="The agent templates: canvas2graph's demos and RAGFlow's, with their DSLs")
async def list_templates(tenant_id: str = Depends(tenant)):
    return ok([template_view(t) for t in templates()])

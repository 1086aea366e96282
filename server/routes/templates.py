"""The agent templates canvas2graph ships (RAGFlow's `GET /agents/templates`)."""
from __future__ import annotations

from fastapi import APIRouter, Depends

from runtime.templates import template_view, templates
from server.auth import tenant
from server.errors import ok

router = APIRouter(prefix="/api/v1", tags=["templates"])


@router.get("/agents/templates", summary="The agent templates: canvas2graph's demos and RAGFlow's, with their DSLs")
async def list_templates(tenant_id: str = Depends(tenant)):
    return ok([template_view(t) for t in templates()])

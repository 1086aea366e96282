"""API tokens: `Authorization: Bearer <token>` (or the raw token, as RAGFlow accepts) names a tenant."""
from __future__ import annotations

from fastapi import Request

from canvas2graph.server.errors import ApiError, RetCode


async def tenant(request: Request) -> str:
    """The tenant of the request's token (a FastAPI dependency)."""
    header = request.headers.get("authorization", "").strip()
    if not header:
        raise ApiError(RetCode.AUTHENTICATION_ERROR, "Authorization is missing: send `Authorization: Bearer <token>`",
                       status=401)
    token = header[7:].strip() if header[:7].lower() == "bearer " else header
    found = await request.app.state.store.tenant_of(token) if token else None
    if found is None:
        raise ApiError(RetCode.AUTHENTICATION_ERROR, "Authentication error: API key is invalid!", status=401)
    return found

"""The files CodeExec, DocGenerator and ExcelProcessor stored (charts, tables, documents), linked from
answers as `/api/v1/documents/artifact/<name>`, the path RAGFlow links its artifacts by.

No token is asked for: an answer's markdown image is fetched by a browser that sends none. A link is
a capability instead: names are 128 random bits, and only names of that form are served.
"""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

from runtime.sandbox import ARTIFACT_TYPES, DOCUMENT_TYPES, stored_artifact
from server.errors import ApiError, RetCode

ROUTE = "/api/v1/documents/artifact"
router = APIRouter(tags=["artifacts"])
# Served as files to save, not pages: an HTML or SVG artifact would otherwise run its scripts on this origin.
ACTIVE = {".html", ".svg"}


@router.get(ROUTE + "/{name}", summary="A file a CodeExec script wrote or a component produced, as linked from an answer")
async def artifact(name: str, request: Request):
    path = stored_artifact(name, request.app.state.code_policy)
    if path is None:
        raise ApiError(RetCode.NOT_FOUND, f"no artifact named {name!r}", status=404)
    suffix = path.suffix.lower()
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
    media_type = {**ARTIFACT_TYPES, **DOCUMENT_TYPES}.get(suffix, "application/octet-stream")
    return FileResponse(path, media_type=media_type, headers=headers,
                        content_disposition_type="attachment" if suffix in ACTIVE else "inline",
                        filename=path.name if suffix in ACTIVE else None)

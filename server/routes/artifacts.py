"""The files CodeExec, DocGenerator and ExcelProcessor stored (charts, tables, documents), linked from
answers as `/api/v1/documents/artifact/<name>`, the path RAGFlow links its artifacts by.

No token is asked for: an answer's markdown image is fetched by a browser that sends none. A link is
a capability instead: names are 128 random bits, and only names of that form are served. The same
files reach their tenant, with a token, through `/agents/attachments/<id>/...` (routes/files.py).
"""
from __future__ import annotations

from fastapi import APIRouter, Request

from canvas2graph.runtime.services.sandbox import ARTIFACT_TYPES, DOCUMENT_TYPES, stored_artifact
from canvas2graph.server.config import ARTIFACT_ROUTE as ROUTE
from canvas2graph.server.errors import ApiError, RetCode
from canvas2graph.server.routes.files import file_reply

router = APIRouter(tags=["artifacts"])


@router.get(ROUTE + "/{name}", summary="A file a CodeExec script wrote or a component produced, as linked from an answer")
async def artifact(name: str, request: Request):
    path = stored_artifact(name, request.app.state.code_policy)
    if path is None:
        raise ApiError(RetCode.NOT_FOUND, f"no artifact named {name!r}", status=404)
    media_type = {**ARTIFACT_TYPES, **DOCUMENT_TYPES}.get(path.suffix.lower(), "application/octet-stream")
    # shown in the browser when safe (images, PDF, text); HTML and SVG are saved, never run on this origin
    return file_reply(path, filename=path.name, mime_type=media_type, inline=True)

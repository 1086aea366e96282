"""Files in and out of agents (RAGFlow's routes): uploads for a run, and what runs produced.

- `POST /agents/{agent_id}/upload`: multipart `file` parts (one or several) or `?url=`, stored in the run
  file store for the caller's tenant under its upload limits (server/uploads.py); the reply is the
  file's entry (a list of entries for several files), which the client then sends in a completion's
  `files` or as a file field's value.
- `GET /agents/attachments/{id}/preview` and `/download`, `GET /agents/download?id=` (and RAGFlow's
  older `GET /document/download/{id}`): a file the tenant uploaded or one its runs produced (DocGenerator's
  `doc_id`, a CodeExec or ExcelProcessor artifact's id). Another tenant's file is "not found".

These routes answer errors with an HTTP status as well as RAGFlow's envelope: their clients (browsers,
download tools, upload widgets) look at the status first.
"""
from __future__ import annotations

import asyncio
import re
from pathlib import Path, PurePosixPath
from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, Response

from canvas2graph.runtime.services.files import LocalFileStore
from canvas2graph.runtime.services.sandbox import owned_artifact
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ApiError, RetCode, argument_error, not_found, ok
from canvas2graph.server.deps import owned_agent
from canvas2graph.server.uploads import Incoming, fetch_url, store_uploads

FILE_NAME_BYTES = 255             # RAGFlow's FILE_NAME_LEN_LIMIT
# Shown in the browser: images (not SVG, which can carry scripts), PDF and plain text. Everything else,
# HTML and SVG above all, is sent as a file to save, never rendered on this server's origin.
INLINE_TYPES = {"application/pdf", "text/plain", "text/markdown", "text/csv", "application/json"}
ACTIVE_TYPES = {"text/html", "image/svg+xml", "application/xhtml+xml", "text/xml", "application/xml"}


def http_status(request: Request) -> None:
    """Errors of this route carry their HTTP status (a dependency that runs before the others)."""
    request.state.http_status = True


router = APIRouter(prefix="/api/v1", tags=["files"], dependencies=[Depends(http_status)])


def files_of(request: Request) -> LocalFileStore:
    return request.app.state.files


# --- replies --------------------------------------------------------------------------------------------
def inline_allowed(mime_type: str) -> bool:
    mime = mime_type.split(";")[0].strip().lower()
    if mime in ACTIVE_TYPES:
        return False
    return mime in INLINE_TYPES or mime.startswith("image/")


def file_reply(path: Path, *, filename: str, mime_type: str, inline: bool) -> Response:
    """A stored file with its type; shown in the browser only when asked to and safe, else a download."""
    mime = (mime_type or "application/octet-stream").split(";")[0].strip().lower() or "application/octet-stream"
    shown = inline and inline_allowed(mime)
    if mime.startswith("text/") or mime == "application/json":
        mime += "; charset=utf-8"
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
    return FileResponse(path, media_type=mime, headers=headers, filename=safe_filename(filename),
                        content_disposition_type="inline" if shown else "attachment")


def safe_filename(name: str | None) -> str | None:
    """A name for Content-Disposition: the last path part, without control characters or quotes."""
    base = PurePosixPath(str(name or "").replace("\\", "/")).name
    base = re.sub(r'[\x00-\x1f\x7f"]', "_", base).strip()
    return base or None


def find_file(request: Request, tenant_id: str, file_id: str) -> tuple[Path, str, str] | None:
    """(path, name, type) of a file the tenant uploaded or its runs produced; None for anything else."""
    found = owned_artifact(file_id, tenant_id, request.app.state.code_policy)
    if found is not None:
        path, record = found
        return path, str(record.get("name") or path.name), str(record.get("mime_type") or "")
    store = files_of(request)
    path = store.path(file_id, tenant_id)
    if path is None:
        return None
    entry = store.entry(file_id, tenant_id) or {}
    return path, str(entry.get("name") or file_id), str(entry.get("mime_type") or "")


async def _serve(request: Request, tenant_id: str, file_id: str, *, inline: bool) -> Response:
    found = await asyncio.to_thread(find_file, request, tenant_id, file_id)
    if found is None:
        raise not_found(f"file {file_id}")
    path, name, mime = found
    return file_reply(path, filename=request.query_params.get("filename") or name, mime_type=mime, inline=inline)


# --- uploads --------------------------------------------------------------------------------------------
async def _file_parts(request: Request, most: int) -> list[Incoming]:
    """The request's `file` parts; at most `most` are read (the limit's check says how many is too many)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        shown = content_type or "none"
        raise argument_error(f"send the files as multipart/form-data in the `file` field (Content-Type: {shown})")
    try:
        form = await request.form(max_files=most + 1, max_fields=1000)
    except Exception as e:      # noqa: BLE001 - starlette's parser: a malformed body, or too many parts
        detail = getattr(e, "detail", None) or getattr(e, "message", None) or str(e)
        if "Too many files" in str(detail):
            raise ApiError(RetCode.ARGUMENT_ERROR, f"too many files: more than {most} in one request", status=400)
        raise argument_error(f"the multipart body cannot be read: {detail}")
    parts = [v for k, v in form.multi_items() if k == "file" and not isinstance(v, str)]
    others = sorted({k for k, v in form.multi_items() if k != "file" and not isinstance(v, str)})
    if not parts and others:
        raise argument_error(f"files go in the `file` field, not {', '.join(repr(k) for k in others)}")
    found = []
    for part in parts:
        name = part.filename or "file"
        if len(name.encode("utf-8")) > FILE_NAME_BYTES:
            raise argument_error(f"the file name {name[:40]}... is longer than {FILE_NAME_BYTES} bytes")
        found.append(Incoming(name, await part.read(), part.content_type))
    return found


@router.post("/agents/{agent_id}/upload",
             summary="Store files for a run of the agent: multipart `file` (one or several), or `?url=`")
async def upload(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    limits = request.app.state.upload_policy.of(tenant_id)
    url = (request.query_params.get("url") or "").strip()
    has_body = bool(request.headers.get("content-type")) or request.headers.get("content-length") not in (None, "0")
    parts = await _file_parts(request, limits.max_files) if has_body else []
    if url:
        # as RAGFlow: the URL's content is the file (a single file part beside it is ignored)
        if len(parts) > 1:
            raise argument_error("give either `url` or the files, not both")
        parts = [await fetch_url(url, limits)]
    if not parts:
        raise argument_error("no file to upload: send it in the multipart `file` field, or give `?url=`")
    entries = await store_uploads(files_of(request), tenant_id, parts, limits)
    return ok(entries[0] if len(entries) == 1 else entries)


# --- downloads ------------------------------------------------------------------------------------------
@router.get("/agents/attachments/{attachment_id}/preview",
            summary="A file the tenant uploaded or its runs produced, shown in the browser when safe")
async def preview_attachment(request: Request, attachment_id: str, tenant_id: str = Depends(tenant)):
    return await _serve(request, tenant_id, attachment_id, inline=True)


@router.get("/agents/attachments/{attachment_id}/download",
            summary="A file the tenant uploaded or its runs produced, as a download (`disposition=inline` to show it)")
async def download_attachment(request: Request, attachment_id: str, tenant_id: str = Depends(tenant)):
    inline = request.query_params.get("disposition", "").lower() == "inline"
    return await _serve(request, tenant_id, attachment_id, inline=inline)


@router.get("/document/download/{attachment_id}", summary="RAGFlow's older path of attachments/{id}/download")
async def legacy_document_download(request: Request, attachment_id: str, tenant_id: str = Depends(tenant)):
    return await _serve(request, tenant_id, attachment_id, inline=False)


@router.get("/agents/download", summary="Download a file the tenant uploaded or its runs produced (`id`)")
async def download(request: Request, tenant_id: str = Depends(tenant)):
    file_id = request.query_params.get("id")
    if not file_id:
        raise argument_error("`id` is required: the id of an uploaded file, or the name an answer links")
    return await _serve(request, tenant_id, file_id, inline=False)


"""What a tenant may upload, and storing what it does: the upload route's and the webhook's file parts.

Limits are per tenant, from a TOML file (`serve --upload-limits FILE`, or `$CANVAS2GRAPH_UPLOAD_LIMITS`):
top-level keys set every tenant's limits, a `[tenants."<name>"]` table overrides them for one tenant.

    max_file_mb = 16            # each file (the request body is bounded by --max-body-mb as well)
    max_files = 10              # files in one request
    types = ["pdf", "xlsx"]     # extensions; default: the types RAGFlow reads, "*" allows any
    max_stored_files = 0        # files a tenant keeps in the store (0: no limit)
    max_stored_mb = 0           # bytes a tenant keeps in the store, in MB (0: no limit)

    [tenants.acme]
    max_file_mb = 64

A refused upload is an ApiError with a 4xx status: 413 for a size, 415 for a type, 400 for a count.
"""
from __future__ import annotations

import asyncio
import mimetypes
import os
from dataclasses import dataclass, fields, replace
from pathlib import PurePosixPath
from typing import Any, Iterable, Mapping

from canvas2graph.runtime.services.files import FileStoreError, LocalFileStore, is_file_entry
from canvas2graph.runtime.services.toml_config import read_toml
from canvas2graph.server.errors import ApiError, RetCode, not_found

LIMITS_ENV = "CANVAS2GRAPH_UPLOAD_LIMITS"
MB = 1024 * 1024
# The extensions RAGFlow's `filename_type` recognises (documents, images, audio and video): what its
# agents can read, and so what a tenant may upload unless the limits say otherwise.
RAGFLOW_TYPES = frozenset("""
pdf msg eml doc docx ppt pptx yml xml htm json jsonl ldjson csv txt ini xls xlsx wps rtf hlp pages numbers key md
mdx py js java c cpp h php go ts sh cs kt html sql epub
wav flac ape alac wavpack wv mp3 aac ogg vorbis opus
jpg jpeg png tif gif bmp pcx tga exif fpx svg psd cdr pcd dxf ufo eps ai raw wmf webp avif apng icon ico mpg mpeg
avi rm rmvb mov wmv asf dat asx wvx mpe mpa mp4 mkv
""".split())


class UploadLimitsError(Exception):
    """A limits file that cannot be used: names the file and the key."""


@dataclass(frozen=True)
class UploadLimits:
    """One tenant's limits."""

    max_file_mb: float = 16
    max_files: int = 10
    types: frozenset[str] | None = RAGFLOW_TYPES       # None: any type
    max_stored_files: int = 0
    max_stored_mb: float = 0

    def check_count(self, count: int) -> None:
        if count > self.max_files:
            raise ApiError(RetCode.ARGUMENT_ERROR, f"too many files: {count} in one request, at most "
                           f"{self.max_files} allowed", status=400)

    def check_file(self, name: str, size: int) -> None:
        extension = PurePosixPath(name).suffix.lower().lstrip(".")
        if self.types is not None and extension not in self.types:
            kind = f".{extension} files" if extension else "files without an extension"
            raise ApiError(RetCode.ARGUMENT_ERROR, f"{name}: {kind} cannot be uploaded here", status=415)
        if size > self.max_file_mb * MB:
            raise ApiError(RetCode.ARGUMENT_ERROR, f"{name} is {_mb(size)} MB, over the limit of "
                           f"{_mb(self.max_file_mb * MB)} MB per file", status=413)

    def check_stored(self, usage: tuple[int, int], sizes: list[int]) -> None:
        """The tenant's stored files and bytes, plus those about to be stored, within its quota."""
        count, size = usage[0] + len(sizes), usage[1] + sum(sizes)
        if self.max_stored_files and count > self.max_stored_files:
            raise ApiError(RetCode.ARGUMENT_ERROR, f"the tenant's file store is full: at most "
                           f"{self.max_stored_files} files are kept", status=413)
        if self.max_stored_mb and size > self.max_stored_mb * MB:
            raise ApiError(RetCode.ARGUMENT_ERROR, f"the tenant's file store is full: at most "
                           f"{_mb(self.max_stored_mb * MB)} MB are kept", status=413)


def _mb(size: float) -> str:
    return f"{size / MB:.1f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class UploadPolicy:
    """Every tenant's limits: the defaults, and the tenants the file names."""

    default: UploadLimits = UploadLimits()
    tenants: Mapping[str, UploadLimits] | None = None

    def of(self, tenant: str) -> UploadLimits:
        return (self.tenants or {}).get(tenant, self.default)

    @classmethod
    def load(cls, path: str | None = None, *, max_body_bytes: int | None = None) -> "UploadPolicy":
        """The policy in `path` (default $CANVAS2GRAPH_UPLOAD_LIMITS), or the defaults. Without a file, a
        file's size limit is the server's body limit."""
        path = path or os.environ.get(LIMITS_ENV, "").strip() or None
        base = UploadLimits(max_file_mb=max_body_bytes / MB) if max_body_bytes else UploadLimits()
        if path is None:
            return cls(base)
        data = read_toml(path, "upload limits file", UploadLimitsError)
        tenants = data.pop("tenants", {})
        if not isinstance(tenants, dict):
            raise UploadLimitsError(f"{path}: `tenants` must be a table of tables, one per tenant")
        default = _limits(base, data, f"{path}")
        return cls(default, {str(name): _limits(default, table, f"{path}: tenants.{name}")
                             for name, table in tenants.items()})


def _limits(base: UploadLimits, table: Any, where: str) -> UploadLimits:
    if not isinstance(table, dict):
        raise UploadLimitsError(f"{where} must be a table of limits")
    known = {f.name for f in fields(UploadLimits)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UploadLimitsError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "types":
            values[key] = _types(value, f"{where}: types")
            continue
        number_ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number_ok or value < 0 or (key in ("max_files", "max_stored_files") and not isinstance(value, int)):
            want = "a whole number" if key in ("max_files", "max_stored_files") else "a number"
            raise UploadLimitsError(f"{where}: {key} must be {want}, zero or more, not {value!r}")
        values[key] = value
    return replace(base, **values)


def _types(value: Any, where: str) -> frozenset[str] | None:
    if value == "*" or value == ["*"]:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UploadLimitsError(f"{where} must be a list of extensions (\"pdf\", \"xlsx\", ...) or \"*\"")
    return frozenset(v.strip().lower().lstrip(".") for v in value)


# --- storing ------------------------------------------------------------------------------------------
@dataclass
class Incoming:
    """One file of a request: its name, its declared type and its bytes."""

    name: str
    data: bytes
    content_type: str | None = None

    @property
    def mime_type(self) -> str:
        declared = (self.content_type or "").split(";")[0].strip().lower()
        if declared and declared != "application/octet-stream":
            return declared
        return mimetypes.guess_type(self.name)[0] or declared or "application/octet-stream"


async def store_uploads(store: LocalFileStore, tenant: str, files: Iterable[Incoming], limits: UploadLimits) -> list[dict]:
    """Check every file against the tenant's limits, then store them all: their entries, RAGFlow's shape.
    Nothing is stored when one file is refused."""
    files = list(files)
    limits.check_count(len(files))
    for file in files:
        limits.check_file(file.name, len(file.data))
    if limits.max_stored_files or limits.max_stored_mb:
        limits.check_stored(await asyncio.to_thread(store.usage, tenant), [len(f.data) for f in files])

    def put_all() -> list[dict]:
        return [store.put(f.name, f.data, mime_type=f.mime_type, created_by=tenant) for f in files]

    try:
        return await asyncio.to_thread(put_all)
    except FileStoreError as e:
        raise ApiError(RetCode.SERVER_ERROR, f"the file cannot be stored: {e}", status=500)


# --- RAGFlow's `url` form: the file is what the URL answers ---------------------------------------------
FETCH_TIMEOUT_S = 30.0
MAX_REDIRECTS = 10


async def fetch_url(url: str, limits: UploadLimits) -> Incoming:
    """Download `url` as an upload, through the host guard (private and loopback hosts are refused unless
    CANVAS2GRAPH_UPLOAD_ALLOW_PRIVATE=1; every redirect is checked again), stopping at the size limit."""
    import httpx
    from canvas2graph.runtime.services.netguard import HostGuard, HostRefused

    guard = HostGuard.of("Upload")
    limit = int(limits.max_file_mb * MB)
    try:
        await guard.check_url(url)
        async with httpx.AsyncClient(transport=guard.transport(), follow_redirects=True, max_redirects=MAX_REDIRECTS,
                                     timeout=FETCH_TIMEOUT_S) as client:
            async with client.stream("GET", url) as response:
                if response.status_code >= 400:
                    raise ApiError(RetCode.ARGUMENT_ERROR, f"fetching {url} failed: HTTP {response.status_code}",
                                   status=400)
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise ApiError(RetCode.ARGUMENT_ERROR, f"{url} is over the limit of {_mb(limit)} MB per file",
                                       status=413)
                    chunks.append(chunk)
                content_type = response.headers.get("content-type")
                final = str(response.url)
    except HostRefused as e:
        raise ApiError(RetCode.ARGUMENT_ERROR, f"the URL cannot be fetched: {e}", status=400)
    except httpx.HTTPError as e:
        raise ApiError(RetCode.ARGUMENT_ERROR, f"fetching {url} failed: {type(e).__name__}: {e}", status=400)
    return Incoming(_name_of(final, content_type), b"".join(chunks), content_type)


def _name_of(url: str, content_type: str | None) -> str:
    """The file's name: the URL's last path segment (as RAGFlow names it), with an extension for its type."""
    from urllib.parse import unquote, urlsplit
    parts = urlsplit(url)
    name = unquote(PurePosixPath(parts.path).name) or (parts.hostname or "download")
    mime = (content_type or "").split(";")[0].strip().lower()
    extension = mimetypes.guess_extension(mime) if mime else None
    if extension and ("." not in name or (mime == "text/html" and not name.lower().endswith((".html", ".htm")))):
        name += extension
    return name


# --- files a run request names --------------------------------------------------------------------------
def named_files(files: Any, inputs: Any) -> list[dict]:
    """The file entries a completion names: its `files`, and the values of inputs given as {type: file}."""
    found = [f for f in files if is_file_entry(f)] if isinstance(files, list) else []
    for value in (inputs or {}).values() if isinstance(inputs, dict) else ():
        if isinstance(value, dict) and "file" in str(value.get("type", "")).lower():
            inner = value.get("value")
            found += [v for v in (inner if isinstance(inner, list) else [inner]) if is_file_entry(v)]
    return found


async def require_own_files(request: Any, tenant_id: str, files: Any, inputs: Any) -> None:
    """Refuse, before anything runs, a request that names a file its tenant does not have."""
    store = request.app.state.files
    for entry in named_files(files, inputs):
        file_id = str(entry.get("id") or entry.get("file_id"))
        owner = str(entry.get("created_by") or tenant_id)
        if owner != tenant_id or await asyncio.to_thread(store.path, file_id, tenant_id) is None:
            raise not_found(f"file {file_id}")

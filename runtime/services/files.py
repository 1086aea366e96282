"""Uploaded files: the entries a run carries, and the store that turns them into bytes.

RAGFlow uploads a file once (`FileService.upload_info`) and from then on passes an *entry* around:
`{"id", "name", "size", "extension", "mime_type", "created_by", "created_at", "preview_url"}`. The
request's `files` (which become `sys.files`) are a list of entries; a Begin or UserFillUp field of
type `file` carries one entry or a list of them as its value. Components that need the bytes
(ExcelProcessor, Browser uploads) ask the store for `(created_by, id)`, as RAGFlow's
`FileService.get_blob(created_by, id)` does. A `data:<mime>;base64,...` string stands for a file too.

`FileStore` is the protocol; `LocalFileStore` keeps each file as `<root>/<created_by>/<id>` beside a
small JSON record of its entry. The folder is `CANVAS2GRAPH_FILES_DIR`, by default
`~/.canvas2graph/files`; `canvas2graph run --file PATH` puts files there, and a server's upload
route writes there with `put()` and hands the entry back to the client (see docs/files.md).

Tenants: a run's extras may name its tenant (`ctx.extras["tenant"]`, set by the server for stored
sessions). Then only that tenant's files are read, whatever `created_by` an entry claims, so a
request cannot read another tenant's upload by naming its id.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Protocol, runtime_checkable

FILES_ENV = "CANVAS2GRAPH_FILES_DIR"
EXTRAS_KEY = "files"
LOCAL_OWNER = "local"            # created_by of files the command line stores
_ID = re.compile(r"^[0-9a-f]{32}$")
_OWNER = re.compile(r"^[A-Za-z0-9._@-]{1,128}$")
_DATA_URI = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(;[^,]*)?,", re.S)
CONTENT = "content"              # what a run adds to an entry: the file as components read it (canvas2graph.runtime.services.file_text)


class FileStoreError(Exception):
    """A file entry that cannot be read (unknown id, another tenant's file, a malformed entry)."""


@dataclass(frozen=True)
class LoadedFile:
    """An uploaded file's bytes, with the name and type its entry gave."""

    name: str
    data: bytes
    mime_type: str = "application/octet-stream"
    file_id: str = ""


@runtime_checkable
class FileStore(Protocol):
    def put(self, name: str, data: bytes, *, mime_type: str | None = None, created_by: str = LOCAL_OWNER) -> dict[str, Any]:
        """Store a file; returns its entry, RAGFlow's shape."""

    def get(self, file_id: str, created_by: str = LOCAL_OWNER) -> bytes:
        """The bytes of a stored file; FileStoreError when there is none."""


class LocalFileStore:
    """Files in a local folder, one subfolder per owner (tenant)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).expanduser()

    def _path(self, file_id: str, created_by: str) -> Path:
        if not _ID.match(str(file_id)):
            raise FileStoreError(f"{file_id!r} is not a file id of this store")
        return self.root / owner_folder(created_by) / file_id

    def put(self, name: str, data: bytes, *, mime_type: str | None = None, created_by: str = LOCAL_OWNER) -> dict[str, Any]:
        file_id = uuid.uuid4().hex
        path = self._path(file_id, created_by)
        name = PurePosixPath(str(name).replace("\\", "/")).name or "file"
        entry = {
            "id": file_id, "name": name, "size": len(data),
            "extension": name.rsplit(".", 1)[-1].lower() if "." in name else "",
            "mime_type": mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream",
            "created_by": created_by, "created_at": time.time(), "preview_url": None,
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.with_suffix(".json").write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")
        except OSError as e:
            raise FileStoreError(f"cannot store {name} in {path.parent}: {e.strerror or e}") from None
        return entry

    def get(self, file_id: str, created_by: str = LOCAL_OWNER) -> bytes:
        path = self._path(file_id, created_by)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise FileStoreError(f"no uploaded file {file_id} (of {created_by})") from None
        except OSError as e:
            raise FileStoreError(f"cannot read uploaded file {file_id}: {e.strerror or e}") from None

    def entry(self, file_id: str, created_by: str = LOCAL_OWNER) -> dict[str, Any] | None:
        """The entry `put` returned for a file, or None."""
        try:
            return json.loads(self._path(file_id, created_by).with_suffix(".json").read_text(encoding="utf-8"))
        except (OSError, ValueError, FileStoreError):
            return None

    def path(self, file_id: str, created_by: str = LOCAL_OWNER) -> Path | None:
        """Where a stored file's bytes are (for streaming them), or None when the owner has no such file."""
        try:
            path = self._path(file_id, created_by)
        except FileStoreError:
            return None
        return path if path.is_file() else None

    def usage(self, created_by: str) -> tuple[int, int]:
        """(files, bytes) an owner keeps in the store: what per-tenant upload quotas count."""
        count = size = 0
        try:
            with os.scandir(self.root / owner_folder(created_by)) as found:
                for item in found:
                    if _ID.match(item.name) and item.is_file():
                        count += 1
                        size += item.stat().st_size
        except FileNotFoundError:
            pass
        return count, size


def owner_folder(owner: str) -> str:
    """The folder an owner's files are kept in: its name when that is a plain name, else a digest of it
    (a tenant may be named anything; no name may lead out of the store, or onto another owner's folder:
    a digest starts with "~", which plain names never contain)."""
    owner = str(owner)
    if _OWNER.match(owner) and owner not in (".", ".."):
        return owner
    return "~" + hashlib.sha256(owner.encode("utf-8")).hexdigest()[:40]


def default_store() -> LocalFileStore:
    folder = os.environ.get(FILES_ENV, "").strip()
    return LocalFileStore(folder or Path.home() / ".canvas2graph" / "files")


def store_for(extras: Mapping[str, Any] | None) -> FileStore:
    """The run's file store: `extras["files"]` (a FileStore, or a folder path), else the default folder."""
    given = (extras or {}).get(EXTRAS_KEY)
    if isinstance(given, FileStore):
        return given
    if isinstance(given, (str, os.PathLike)):
        return LocalFileStore(given)
    return default_store()


def is_file_entry(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value.get("id") or value.get("file_id"))


def load_files(value: Any, store: FileStore, tenant: str | None = None) -> list[LoadedFile]:
    """Every file `value` stands for: an entry, a list of entries, a `{type: file, value}` form field,
    or a data URI. Other values (text, numbers) stand for no file."""
    found: list[LoadedFile] = []
    _collect(value, store, tenant, found)
    return found


def _collect(value: Any, store: FileStore, tenant: str | None, found: list[LoadedFile]) -> None:
    if isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, store, tenant, found)
    elif isinstance(value, Mapping):
        if is_file_entry(value):
            found.append(_load_entry(value, store, tenant))
        elif "value" in value:                     # a form field as the request gave it
            _collect(value["value"], store, tenant, found)
    elif isinstance(value, str) and _DATA_URI.match(value):
        found.append(_load_data_uri(value))


def _load_entry(entry: Mapping[str, Any], store: FileStore, tenant: str | None) -> LoadedFile:
    file_id = str(entry.get("id") or entry.get("file_id"))
    owner = str(entry.get("created_by") or tenant or LOCAL_OWNER)
    if tenant is not None and owner != tenant:
        raise FileStoreError(f"file {file_id} does not belong to this tenant")
    name = str(entry.get("name") or entry.get("filename") or file_id)
    mime = str(entry.get("mime_type") or mimetypes.guess_type(name)[0] or "application/octet-stream")
    return LoadedFile(name=name, data=store.get(file_id, owner), mime_type=mime, file_id=file_id)


def _load_data_uri(uri: str) -> LoadedFile:
    head, _, payload = uri.partition(",")
    mime = head[5:].split(";")[0] or "application/octet-stream"
    try:
        data = base64.b64decode(payload, validate=False) if ";base64" in head else payload.encode("utf-8")
    except (binascii.Error, ValueError):
        raise FileStoreError("a data: URI whose base64 content cannot be decoded") from None
    extension = mimetypes.guess_extension(mime) or ".bin"
    return LoadedFile(name=f"uploaded{extension}", data=data, mime_type=mime)

"""Artifacts kept after the run: stored in the artifacts folder and described as RAGFlow describes them.

RAGFlow uploads each artifact to its object store and links it as `/api/v1/documents/artifact/<name>`.
Here an artifact is written to the policy's artifacts folder under a fresh name, and linked by the
policy's URL prefix (a server that serves the folder sets it) or, by default, by its `file://` URI.

A run on behalf of a tenant (a server's run) also records who owns each artifact, in
`<artifacts>/owners/<tenant>/<id>.json` (`id`: the stored name without its extension, DocGenerator's
`doc_id`): the server's authenticated routes serve a tenant only what its runs produced
(`owned_artifact`), as RAGFlow keeps a generated document in the tenant's bucket.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from canvas2graph.runtime.services.files import owner_folder
from canvas2graph.runtime.services.sandbox.policy import CodePolicy
from canvas2graph.runtime.services.sandbox.types import Artifact

TEXT_PREVIEW_CHARS = 20_000      # what `_ATTACHMENT_CONTENT` keeps of one text artifact

# Documents that components produce (DocGenerator, ExcelProcessor), served beside the sandbox's types.
DOCUMENT_TYPES = {
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".txt": "text/plain",
    ".md": "text/markdown",
}


STORED_NAME = re.compile(r"^[0-9a-f]{32}(\.[a-z0-9]{1,8})?$")    # what store_artifacts names a file


class ArtifactStoreError(Exception):
    pass


def stored_artifact(name: str, policy: CodePolicy) -> Path | None:
    """The file `store_artifacts` stored as `name`, or None (an unknown name, or one that is not a
    stored name at all: nothing outside the artifacts folder can be reached through it)."""
    if not STORED_NAME.match(name):
        return None
    path = policy.artifacts_path / name
    return path if path.is_file() else None


OWNERS = "owners"


def owned_artifact(attachment_id: str, owner: str, policy: CodePolicy) -> tuple[Path, dict[str, Any]] | None:
    """(path, record) of an artifact a run of `owner` stored, by its id or stored name; None otherwise
    (another owner's artifact, an unknown id, or not an id at all)."""
    if not STORED_NAME.match(attachment_id):
        return None
    record_path = policy.artifacts_path / OWNERS / owner_folder(owner) / (attachment_id.split(".")[0] + ".json")
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    path = stored_artifact(str(record.get("stored", "")), policy)
    return (path, record) if path is not None else None


def _record_owner(folder: Path, owner: str, stored_name: str, art: Artifact) -> None:
    record = {"id": stored_name.split(".")[0], "stored": stored_name, "name": art.name, "mime_type": art.mime_type,
              "size": art.size, "created_by": owner, "created_at": time.time()}
    target = folder / OWNERS / owner_folder(owner)
    target.mkdir(parents=True, exist_ok=True)
    (target / (record["id"] + ".json")).write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")


def store_artifacts(artifacts: list[Artifact], policy: CodePolicy, owner: str | None = None) -> list[dict[str, Any]]:
    """Write each artifact to the artifacts folder: [{name, url, mime_type, size, path}]. With an `owner`
    (the run's tenant), each is recorded as that owner's."""
    if not artifacts:
        return []
    folder = policy.artifacts_path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArtifactStoreError(f"cannot create the artifacts folder {folder}: {e.strerror or e}") from None
    stored = []
    for art in artifacts:
        storage_name = uuid.uuid4().hex + PurePosixPath(art.name).suffix.lower()
        path = folder / storage_name
        try:
            path.write_bytes(art.data)
            if owner:
                _record_owner(folder, owner, storage_name, art)
        except OSError as e:
            raise ArtifactStoreError(f"cannot store artifact {art.name} in {folder}: {e.strerror or e}") from None
        url = policy.artifact_url.rstrip("/") + "/" + storage_name if policy.artifact_url else path.resolve().as_uri()
        stored.append({"name": art.name, "url": url, "mime_type": art.mime_type, "size": art.size, "path": str(path)})
    return stored


def store_document(name: str, data: bytes, mime_type: str, policy: CodePolicy, owner: str | None = None) -> dict[str, Any]:
    """Keep one file a component produced, as CodeExec's artifacts are kept: {name, url, mime_type, size, path}."""
    return store_artifacts([Artifact(name, mime_type, data)], policy, owner)[0]


def attachment_kind(name: str, mime_type: str) -> str:
    mime = (mime_type or "").lower()
    if mime.startswith("image/"):
        return "image"
    kinds = {"application/pdf": "pdf", "text/csv": "csv", "application/json": "json", "text/html": "html"}
    return kinds.get(mime) or PurePosixPath(name).suffix.lower().lstrip(".") or "file"


def attachment_content(artifacts: list[Artifact], stored: list[dict[str, Any]]) -> str:
    """`_ATTACHMENT_CONTENT`: a count, then one section per artifact with its text where it has some.

    RAGFlow parses each file with its document parsers; here text files (CSV, JSON, HTML, SVG) give
    their text, PDFs the text pypdf extracts, and images their name and link.
    """
    sections = []
    for idx, (art, where) in enumerate(zip(artifacts, stored), start=1):
        kind = attachment_kind(art.name, art.mime_type)
        body = _text_of(art, Path(where["path"])) if where.get("path") else None
        if not body:
            body = f"{kind} file, {art.size} bytes: {where['url']}"
        sections.append(f"attachment{idx} ({kind}): {art.name}\n{body}".strip())
    if not sections:
        return "attachment_count: 0"
    return f"attachment_count: {len(sections)}\n\n" + "\n\n".join(sections)


def _text_of(art: Artifact, path: Path) -> str:
    suffix = PurePosixPath(art.name).suffix.lower()
    try:
        if suffix in (".html", ".pdf"):
            from canvas2graph.runtime.services.retrieval.indexing import read_sections
            text = "\n".join(s.text for s in read_sections(path))
        elif suffix == ".json":
            text = json.dumps(json.loads(art.data.decode("utf-8")), ensure_ascii=False, indent=2)
        elif suffix in (".csv", ".svg"):
            text = art.data.decode("utf-8", errors="replace")
        else:
            return ""
    except Exception:         # a damaged file still gets its section, with the link instead of text
        return ""
    text = text.strip()
    return text if len(text) <= TEXT_PREVIEW_CHARS else text[:TEXT_PREVIEW_CHARS] + "\n[...]"

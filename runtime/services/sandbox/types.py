"""What one execution produced, in the shape of RAGFlow's sandbox executor manager replies.

`status` uses the manager's values: success, program_error, resource_limit_exceeded,
unauthorized_access, runtime_error, program_runner_error. `limit` says which resource ran out
(time, memory, output) when the status is resource_limit_exceeded.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

# The file types RAGFlow's sandbox collects as artifacts, and their MIME types.
ARTIFACT_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".svg": "image/svg+xml",
    ".pdf": "application/pdf",
    ".csv": "text/csv",
    ".json": "application/json",
    ".html": "text/html",
}

class CodeRefused(Exception):
    """The code cannot run here: local execution is switched off (or has no working sandbox) and no
    remote sandbox is configured. The message says what to change."""


SUCCESS = "success"
PROGRAM_ERROR = "program_error"
LIMIT_EXCEEDED = "resource_limit_exceeded"
RUNNER_ERROR = "program_runner_error"


@dataclass(frozen=True)
class Artifact:
    """A file the script wrote: its name (no directories), MIME type and bytes."""

    name: str
    mime_type: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "mime_type": self.mime_type, "size": self.size,
                "content_b64": base64.b64encode(self.data).decode("ascii")}

    @classmethod
    def from_wire(cls, item: Any) -> "Artifact | None":
        """An artifact from a sandbox reply, or None when the entry is unusable (no name, bad base64)."""
        if not isinstance(item, dict):
            return None
        name = PurePosixPath(str(item.get("name") or "")).name
        if not name or name.startswith("."):
            return None
        try:
            data = base64.b64decode(str(item.get("content_b64") or ""), validate=True)
        except (binascii.Error, ValueError):
            return None
        if not data:
            return None
        mime = str(item.get("mime_type") or "") or ARTIFACT_TYPES.get(PurePosixPath(name).suffix.lower(), "application/octet-stream")
        return cls(name, mime, data)


@dataclass
class Execution:
    status: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    result_present: bool = False      # main() returned a value (possibly None/null)
    result: Any = None
    artifacts: list[Artifact] = field(default_factory=list)
    limit: str | None = None           # time, memory or output
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == SUCCESS

    def error_message(self) -> str:
        """What went wrong, for `_ERROR`: the sandbox's own words when it gave some."""
        text = (self.stderr or "").strip() or (self.detail or "").strip()
        return text or f"the code sandbox reported {self.status} (exit code {self.exit_code})"

    def to_wire(self) -> dict[str, Any]:
        """The executor manager's reply body for this execution."""
        return {"status": self.status, "stdout": self.stdout, "stderr": self.stderr, "exit_code": self.exit_code,
                "detail": self.detail or None, "resource_limit_type": self.limit,
                "artifacts": [a.to_wire() for a in self.artifacts],
                "result": {"present": self.result_present, "value": self.result, "type": "json"}}

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> "Execution":
        structured = body.get("result") if isinstance(body.get("result"), dict) else {}
        artifacts = [a for a in (Artifact.from_wire(x) for x in body.get("artifacts") or []) if a is not None]
        try:
            exit_code = int(body.get("exit_code") or 0)
        except (TypeError, ValueError):
            exit_code = -1
        return cls(status=str(body.get("status") or _status_without_field(body, structured, artifacts)),
                   stdout=str(body.get("stdout") or ""), stderr=str(body.get("stderr") or ""),
                   exit_code=exit_code, result_present=structured.get("present") is True,
                   result=structured.get("value"), artifacts=artifacts,
                   limit=body.get("resource_limit_type"), detail=str(body.get("detail") or ""))


def _status_without_field(body: dict, structured: dict, artifacts: list) -> str:
    """Older sandboxes send no status: RAGFlow then treats stderr with nothing else as the failure."""
    nothing = not structured.get("present") and not artifacts and not str(body.get("stdout") or "").strip()
    return PROGRAM_ERROR if body.get("stderr") and nothing else SUCCESS


def normalize_language(lang: Any) -> str:
    """RAGFlow's language names to the sandbox's: python/python3 -> python, javascript/nodejs -> nodejs."""
    low = str(lang or "").strip().lower()
    if low in ("python", "python3"):
        return "python"
    if low in ("javascript", "nodejs"):
        return "nodejs"
    raise ValueError(f"unsupported language {lang!r}: CodeExec runs python (python3) or javascript (nodejs)")

"""Where and how CodeExec may run code: the policy a run gets through `ctx.extras["code"]`.

Local execution runs the script as a child process of this one. It has limits (time, memory, output,
a scratch directory, an environment without this process's secrets) but it is not a security
boundary: the script runs as the same user. So it can be switched off, and a server refuses it unless
it is enabled explicitly. A RAGFlow-compatible remote sandbox (RAGFlow's sandbox executor manager,
`POST <url>/run`) can be configured instead; when one is configured it is always used.

The policy comes from, in order: the values a caller passes (a `CodePolicy`, or a dict of its
fields, as the server does with `{"allow_local": False}`), then the environment, then the defaults
(local execution allowed: the command line runs the user's own canvases on the user's own machine).

Environment: `CANVAS2GRAPH_SANDBOX_URL`, `CANVAS2GRAPH_SANDBOX_TOKEN`, `CANVAS2GRAPH_ALLOW_LOCAL_CODE`
(0/false turns local execution off), `CANVAS2GRAPH_CODE_TIMEOUT` (seconds), `CANVAS2GRAPH_CODE_MEMORY_MB`,
`CANVAS2GRAPH_CODE_PYTHON`, `CANVAS2GRAPH_CODE_NODE`, `CANVAS2GRAPH_ARTIFACTS_DIR`, `CANVAS2GRAPH_ARTIFACT_URL`.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

ENV = {
    "sandbox_url": "CANVAS2GRAPH_SANDBOX_URL",
    "sandbox_token": "CANVAS2GRAPH_SANDBOX_TOKEN",
    "allow_local": "CANVAS2GRAPH_ALLOW_LOCAL_CODE",
    "timeout": "CANVAS2GRAPH_CODE_TIMEOUT",
    "memory_mb": "CANVAS2GRAPH_CODE_MEMORY_MB",
    "python": "CANVAS2GRAPH_CODE_PYTHON",
    "node": "CANVAS2GRAPH_CODE_NODE",
    "artifacts_dir": "CANVAS2GRAPH_ARTIFACTS_DIR",
    "artifact_url": "CANVAS2GRAPH_ARTIFACT_URL",
}
_FALSE = {"0", "false", "no", "off"}


class CodePolicyError(ValueError):
    """A code policy value that cannot be used; the message names the field."""


@dataclass(frozen=True)
class CodePolicy:
    allow_local: bool = True              # run scripts as local child processes when no sandbox is configured
    sandbox_url: str = ""                 # RAGFlow's executor manager, e.g. http://sandbox-executor-manager:9385
    sandbox_token: str = ""               # sent as `Authorization: Bearer` (the manager's API token)
    timeout: float = 30.0                 # wall-clock seconds per execution
    memory_mb: int = 512                  # address-space limit of a local Python run (Node: its heap)
    max_output_bytes: int = 1024 * 1024   # stdout and stderr are each kept up to this size
    max_artifacts: int = 10               # files collected per execution
    max_artifact_bytes: int = 10 * 1024 * 1024
    max_file_bytes: int = 100 * 1024 * 1024   # any file a local script writes (RLIMIT_FSIZE)
    python: str = field(default_factory=lambda: sys.executable)
    node: str = "node"
    artifacts_dir: str = ""               # where artifacts are stored; "" = ~/.canvas2graph/artifacts
    artifact_url: str = ""                # URL prefix for stored artifacts; "" = their file:// URI

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise CodePolicyError(f"code policy: timeout must be a positive number of seconds, not {self.timeout!r}")
        if self.memory_mb <= 0:
            raise CodePolicyError(f"code policy: memory_mb must be positive, not {self.memory_mb!r}")
        if min(self.max_output_bytes, self.max_artifact_bytes, self.max_file_bytes) <= 0 or self.max_artifacts < 0:
            raise CodePolicyError("code policy: output and artifact limits must be positive")

    @property
    def remote(self) -> bool:
        return bool(self.sandbox_url)

    @property
    def artifacts_path(self) -> Path:
        return Path(self.artifacts_dir).expanduser() if self.artifacts_dir else Path.home() / ".canvas2graph" / "artifacts"

    @classmethod
    def resolve(cls, given: "CodePolicy | Mapping[str, Any] | None" = None,
                environ: Mapping[str, str] | None = None) -> "CodePolicy":
        """The policy for a run: `given` (a policy as it is, or a dict of fields), then the environment."""
        if isinstance(given, CodePolicy):
            return given
        if given is not None and not isinstance(given, Mapping):
            raise CodePolicyError(f"code policy: expected a CodePolicy or a dict of its fields, not {type(given).__name__}")
        environ = os.environ if environ is None else environ
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, var in ENV.items():
            raw = environ.get(var)
            if raw not in (None, ""):
                values[name] = _convert(name, raw, known[name].type, var)
        for name, value in dict(given or {}).items():
            if name not in known:
                raise CodePolicyError(f"code policy: unknown field {name!r} (known: {', '.join(sorted(known))})")
            values[name] = value
        return cls(**values)


def _convert(name: str, raw: str, kind: Any, var: str) -> Any:
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    try:
        if kind == "bool":
            return raw.strip().lower() not in _FALSE
        if kind == "float":
            return float(raw)
        if kind == "int":
            return int(raw)
    except ValueError:
        raise CodePolicyError(f"{var}={raw!r}: {name} must be a number") from None
    return raw

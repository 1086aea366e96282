"""Where and how CodeExec may run code: the policy a run gets through `ctx.extras["code"]`.

Local execution runs each script in a bubblewrap sandbox on this machine (`canvas2graph.runtime.services.sandbox.bubblewrap`:
its own namespaces, no network, a read-only view of the interpreter, an empty environment, resource
limits). Where bubblewrap is missing, local execution is refused with a message saying what to
install, unless the caller opts into running scripts WITHOUT isolation (`unsafe_local`, which only
`canvas2graph run --unsafe-local-code` sets; never a server). A RAGFlow-compatible remote sandbox
(RAGFlow's sandbox executor manager, `POST <url>/run`) can be configured instead; when one is
configured it is always used. Local execution can also be switched off altogether.

The policy comes from, in order: the values a caller passes (a `CodePolicy`, or a dict of its
fields, as the server does with `{"allow_local": False}`), then the environment, then the defaults
(local execution allowed: the command line runs the user's own canvases on the user's own machine).

Environment: `CANVAS2GRAPH_SANDBOX_URL`, `CANVAS2GRAPH_SANDBOX_TOKEN`, `CANVAS2GRAPH_ALLOW_LOCAL_CODE`
(0/false turns local execution off), `CANVAS2GRAPH_CODE_TIMEOUT` (seconds), `CANVAS2GRAPH_CODE_MEMORY_MB`,
`CANVAS2GRAPH_CODE_MAX_PROCESSES`, `CANVAS2GRAPH_CODE_DISK_MB`, `CANVAS2GRAPH_CODE_PYTHON`,
`CANVAS2GRAPH_CODE_NODE`, `CANVAS2GRAPH_BWRAP`, `CANVAS2GRAPH_ARTIFACTS_DIR`, `CANVAS2GRAPH_ARTIFACT_URL`.
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
    "max_processes": "CANVAS2GRAPH_CODE_MAX_PROCESSES",
    "disk_mb": "CANVAS2GRAPH_CODE_DISK_MB",
    "python": "CANVAS2GRAPH_CODE_PYTHON",
    "node": "CANVAS2GRAPH_CODE_NODE",
    "bwrap": "CANVAS2GRAPH_BWRAP",
    "artifacts_dir": "CANVAS2GRAPH_ARTIFACTS_DIR",
    "artifact_url": "CANVAS2GRAPH_ARTIFACT_URL",
}
_FALSE = {"0", "false", "no", "off"}


class CodePolicyError(ValueError):
    """A code policy value that cannot be used; the message names the field."""


@dataclass(frozen=True)
class CodePolicy:
    allow_local: bool = True              # run scripts on this machine (in the sandbox) when no remote one is configured
    unsafe_local: bool = False            # ... as plain child processes, WITHOUT the sandbox (an explicit opt-in)
    sandbox_url: str = ""                 # RAGFlow's executor manager, e.g. http://sandbox-executor-manager:9385
    sandbox_token: str = ""               # sent as `Authorization: Bearer` (the manager's API token)
    timeout: float = 30.0                 # wall-clock seconds per execution
    memory_mb: int = 512                  # address space of each process of a Python run (Node: its heap)
    max_processes: int = 32               # processes and threads of one run (the sandbox's own two included)
    disk_mb: int = 100                    # what a run may write: its scratch folder's size, and any one file
    max_output_bytes: int = 1024 * 1024   # stdout and stderr are each kept up to this size
    max_artifacts: int = 10               # files collected per execution
    max_artifact_bytes: int = 10 * 1024 * 1024
    python: str = field(default_factory=lambda: sys.executable)
    node: str = "node"
    bwrap: str = "bwrap"                  # bubblewrap's executable
    artifacts_dir: str = ""               # where artifacts are stored; "" = ~/.canvas2graph/artifacts
    artifact_url: str = ""                # URL prefix for stored artifacts; "" = their file:// URI

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise CodePolicyError(f"code policy: timeout must be a positive number of seconds, not {self.timeout!r}")
        for name in ("memory_mb", "max_processes", "disk_mb"):
            if getattr(self, name) <= 0:
                raise CodePolicyError(f"code policy: {name} must be positive, not {getattr(self, name)!r}")
        if min(self.max_output_bytes, self.max_artifact_bytes) <= 0 or self.max_artifacts < 0:
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

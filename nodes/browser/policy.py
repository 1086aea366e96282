"""Whether and how the Browser component may drive Chromium: the policy a run gets through
`ctx.extras["browser"]`, then the environment, then the defaults.

A browser run by a canvas loads whatever pages the model chooses, on this machine, with its
network. The command line allows it (the user's own canvases); a server refuses it unless started
with `--allow-browser`, as it refuses local code execution. Every request the browser makes goes
through the host guard (`network.py`) either way.

Environment: `CANVAS2GRAPH_ALLOW_BROWSER` (0/false refuses), `CANVAS2GRAPH_CHROMIUM` (the browser
binary; RAGFlow's `BROWSER_USE_EXECUTABLE_PATH` is read too), `CANVAS2GRAPH_BROWSER_PROFILES` (where
persistent sessions keep their profiles), `CANVAS2GRAPH_BROWSER_ACTION_TIMEOUT` (seconds per action).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

EXTRAS_KEY = "browser"
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable",
              "/opt/chrome/chrome", "/usr/local/bin/chrome")
_FALSE = ("0", "false", "no", "off")


class BrowserRefused(Exception):
    """Browsing is switched off for this run, or no browser is installed."""


@dataclass(frozen=True)
class BrowserPolicy:
    allow: bool = True
    executable: str = ""                 # "" = the first browser found (CANDIDATES, then PATH)
    profiles_dir: str = ""               # "" = ~/.canvas2graph/browser-profiles
    action_timeout: float = 30.0         # seconds one navigation or page action may take
    max_page_chars: int = 8000           # page text the model reads per step
    max_body_bytes: int = 20_000_000     # largest response the browser may receive, and largest upload fetched

    @classmethod
    def resolve(cls, given: "BrowserPolicy | Mapping[str, Any] | None" = None,
                environ: Mapping[str, str] | None = None) -> "BrowserPolicy":
        if isinstance(given, BrowserPolicy):
            return given
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        allow = environ.get("CANVAS2GRAPH_ALLOW_BROWSER", "").strip().lower()
        if allow:
            values["allow"] = allow not in _FALSE
        executable = environ.get("CANVAS2GRAPH_CHROMIUM") or environ.get("BROWSER_USE_EXECUTABLE_PATH")
        if executable:
            values["executable"] = executable
        if environ.get("CANVAS2GRAPH_BROWSER_PROFILES"):
            values["profiles_dir"] = environ["CANVAS2GRAPH_BROWSER_PROFILES"]
        raw = environ.get("CANVAS2GRAPH_BROWSER_ACTION_TIMEOUT", "").strip()
        if raw:
            try:
                values["action_timeout"] = float(raw)
            except ValueError:
                raise ValueError(f"CANVAS2GRAPH_BROWSER_ACTION_TIMEOUT must be a number of seconds, not {raw!r}") from None
        known = {f.name for f in fields(cls)}
        for name, value in dict(given or {}).items():
            if name not in known:
                raise ValueError(f"browser policy: unknown field {name!r} (known: {', '.join(sorted(known))})")
            values[name] = value
        return cls(**values)

    def browser_binary(self) -> str:
        """The Chromium to drive; BrowserRefused naming what to install when there is none."""
        if self.executable:
            if not (os.path.isfile(self.executable) and os.access(self.executable, os.X_OK)):
                raise BrowserRefused(f"the browser {self.executable} (CANVAS2GRAPH_CHROMIUM) is not an executable file")
            return self.executable
        for path in CANDIDATES:
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        for name in ("chromium", "chromium-browser", "google-chrome"):
            found = shutil.which(name)
            if found:
                return found
        raise BrowserRefused("no Chromium found: install Debian's chromium package (apt-get install chromium) or "
                             "set CANVAS2GRAPH_CHROMIUM to a Chrome or Chromium binary")

    @property
    def profiles_path(self) -> Path:
        return Path(self.profiles_dir).expanduser() if self.profiles_dir else Path.home() / ".canvas2graph" / "browser-profiles"

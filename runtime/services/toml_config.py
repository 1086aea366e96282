"""Reading a TOML settings file, with the two errors a user can act on: the file cannot be read, or it is
not TOML. The retrieval config (`runtime/services/retrieval/config.py`) and the server's upload limits
(`server/uploads.py`) are read this way; each checks the keys itself."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Callable


def read_toml(path: str | os.PathLike[str], what: str, error: Callable[[str], Exception]) -> dict[str, Any]:
    """The file at `path` as a dict. A missing or unreadable file, and a file that is not valid TOML, raise
    `error(message)`, the message naming `what` the file is (e.g. "upload limits file") and its path."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise error(f"{what} {path} is not valid TOML: {e}") from None

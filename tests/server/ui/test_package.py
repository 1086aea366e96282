"""The web UI's built files ship in the package: every file under server/ui/static matches the package data
that pyproject.toml declares for `canvas2graph.server.ui` (a wheel without them would serve a blank page)."""
from __future__ import annotations

import fnmatch
import tomllib

from tests.server.helpers import REPO


def test_every_static_file_is_package_data():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["canvas2graph.server.ui"]
    static = REPO / "server" / "ui"
    files = [p.relative_to(static).as_posix() for p in (static / "static").rglob("*") if p.is_file()]
    assert "static/index.html" in files and "static/assets/app.js" in files and "static/source.sha256" in files
    assert [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []
    assert (REPO / "server" / "ui" / "__init__.py").is_file()      # a package, found by packages.find

"""What ships in server/ui/static is built from the sources in server/ui/web.

The build writes the hash of its sources into `static/source.sha256` (server/ui/web/source-hash.js); this
test computes the same hash from the sources in the tree, so a change to a source without a rebuild (or a
build edited by hand) fails here. Where the build tools are installed (`npm --prefix server/ui/web ci`, as
.ci/run does), the sources are also built again into a temporary folder and compared file by file with
what ships. Rebuild with `npm --prefix server/ui/web ci && npm --prefix server/ui/web run build` (docs/ui.md).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tests.server.helpers import REPO

WEB = REPO / "server" / "ui" / "web"
STATIC = REPO / "server" / "ui" / "static"
SOURCES = ["index.html", "package.json", "package-lock.json", "vite.config.js", "source-hash.js", "public", "src"]
REBUILD = "npm --prefix server/ui/web ci && npm --prefix server/ui/web run build"


def source_hash() -> str:
    """source-hash.js's hash: SHA-256 over each file's relative path, a NUL, its bytes and a NUL, in path order."""
    paths = []
    for entry in SOURCES:
        path = WEB / entry
        paths += [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    digest = hashlib.sha256()
    for rel in sorted(p.relative_to(WEB).as_posix() for p in paths):
        digest.update(rel.encode() + b"\0" + (WEB / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def test_the_shipped_build_names_the_sources_in_the_tree():
    shipped = (STATIC / "source.sha256").read_text(encoding="utf-8").strip()
    assert shipped == source_hash(), f"server/ui/static is not the build of server/ui/web: run `{REBUILD}`"


def test_building_the_sources_again_gives_what_ships(tmp_path):
    vite = WEB / "node_modules" / ".bin" / "vite"
    if not vite.exists():
        reason = "the build tools are not installed (`npm --prefix server/ui/web ci`)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path / "static"
    done = subprocess.run([str(vite), "build", "--outDir", str(out), "--emptyOutDir", "--logLevel", "error"], cwd=WEB,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    built = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    shipped = sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file())
    assert built == shipped
    for rel in built:
        assert (out / rel).read_bytes() == (STATIC / rel).read_bytes(), f"{rel} differs: run `{REBUILD}`"

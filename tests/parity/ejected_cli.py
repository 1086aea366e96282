"""A command line that runs a DSL as its ejected module: what the parity checker drives for the eject tests.

    python tests/parity/ejected_cli.py run DSL [run's options]

ejects DSL with `canvas2graph export DSL --format python` into $CANVAS2GRAPH_EJECT_DIR (a temporary
folder by default), then runs that file as `python ejected.py [run's options]` would, in this process.
"""
from __future__ import annotations

import hashlib
import os
import runpy
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def eject(dsl: str) -> Path:
    from canvas2graph.cli import main
    folder = Path(os.environ.get("CANVAS2GRAPH_EJECT_DIR") or tempfile.mkdtemp(prefix="ejected-"))
    folder.mkdir(parents=True, exist_ok=True)
    case = Path(dsl).resolve()
    digest = hashlib.sha256(case.read_bytes()).hexdigest()[:10]
    out = folder / f"{case.parent.name}_{digest}.py"
    if not out.exists():
        status = main(["export", dsl, "--format", "python", "--out", str(out)])
        if status:
            sys.exit(status)
    return out


def run(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "run":
        sys.exit("usage: ejected_cli.py run DSL [options]")
    module = eject(argv[1])
    sys.argv = [str(module), *argv[2:]]
    runpy.run_path(str(module), run_name="__main__")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    run(sys.argv[1:])

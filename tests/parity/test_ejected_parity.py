"""Every recorded trace holds when the canvas runs as its ejected Python module.

The checker that ships with the traces drives `tests/parity/ejected_cli.py` instead of `canvas2graph`:
it ejects each case's DSL (`canvas2graph export DSL --format python`) and runs the module as
`python ejected.py --session ... --llm-script ... --format jsonl`, which must print RAGFlow's events
exactly as `canvas2graph run DSL` does, at the level test_parity.py holds the case to (`order`,
unless the case says otherwise), with the project's stated deviations applied the same way.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.parity.test_parity import CHECKER, PROJECT_CASES, _cases, with_deviations

SHIM = Path(__file__).resolve().parent / "ejected_cli.py"


def _check(cases_dir: Path, case: str, level: str, eject_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN", "_SECRET_KEY", "_COOKIE"))}
    env["CANVAS2GRAPH_EJECT_DIR"] = str(eject_dir)
    proc = subprocess.run([sys.executable, str(CHECKER), "--cases", str(cases_dir), "--cli", " ".join([*forkserver.python(), str(SHIM)]),
                           "--level", level, case], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list(eject_dir.glob("*.py"))) == 1        # the module that ran is the one ejected


@pytest.mark.parity
@pytest.mark.parametrize("case", _cases(PROJECT_CASES))
def test_the_ejected_module_replays_the_projects_recorded_trace(case: str, tmp_path: Path) -> None:
    spec = json.loads((PROJECT_CASES / case / "case.json").read_text(encoding="utf-8"))
    cases_dir = PROJECT_CASES
    if (PROJECT_CASES / case / "deviations.json").exists():
        cases_dir = with_deviations(PROJECT_CASES / case, tmp_path).parent
    _check(cases_dir, case, spec.get("level", "order"), tmp_path / "ejected")

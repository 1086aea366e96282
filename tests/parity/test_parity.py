"""RAGFlow's recorded traces, replayed through our CLI by the checker that ships with them.

Two folders of cases: the shared ones (`../shared/parity/cases`) and the project's own
(`tests/parity/cases`, recorded with the oracle for the components the shared set does not cover).
Every case must hold at the `order` level: the exact event sequence RAGFlow emitted, which includes
every component's outputs and which components started (see ../shared/parity/README.md). A project
case whose outputs are random in both engines (a generated document's id) names a lower level and
why in its case.json (`level`, `level_reason`). A case added to either folder is checked without
being listed here.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_dir

SHARED_CASES = REPO.parent / "shared" / "parity" / "cases"
PROJECT_CASES = Path(__file__).resolve().parent / "cases"


def _cases(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _check(cases_dir: Path, case: str, level: str) -> None:
    checker = shared_dir() / "parity" / "check.py"         # skips (fails under CI) when ../shared is absent
    cli = f"{sys.executable} -m runtime.cli"
    proc = subprocess.run([sys.executable, str(checker), "--cases", str(cases_dir), "--cli", cli, "--level", level, case],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parity
@pytest.mark.parametrize("case", _cases(SHARED_CASES) or [None])
def test_recorded_trace_holds_in_event_order(case: str | None) -> None:
    if case is None:
        shared_dir()
        pytest.fail(f"{SHARED_CASES} holds no cases")
    _check(SHARED_CASES, case, "order")


@pytest.mark.parity
@pytest.mark.parametrize("case", _cases(PROJECT_CASES))
def test_projects_recorded_trace_holds(case: str) -> None:
    spec = json.loads((PROJECT_CASES / case / "case.json").read_text(encoding="utf-8"))
    level = spec.get("level", "order")
    if level != "order":
        assert spec.get("level_reason"), f"{case}: a case below the order level must say why (level_reason)"
    _check(PROJECT_CASES, case, level)

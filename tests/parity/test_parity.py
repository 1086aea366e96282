"""RAGFlow's recorded traces, replayed through our CLI by the checker that ships with them.

Every recorded case must hold at the `order` level: the exact event sequence RAGFlow emitted, which
includes every component's outputs and which components started (see ../shared/parity/README.md).
A case added to ../shared/parity/cases is checked without being listed here.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, shared_dir

CASES_DIR = REPO.parent / "shared" / "parity" / "cases"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if p.is_dir()) if CASES_DIR.is_dir() else [None]


@pytest.mark.parity
@pytest.mark.parametrize("case", CASES)
def test_recorded_trace_holds_in_event_order(case: str | None) -> None:
    checker = shared_dir() / "parity" / "check.py"         # skips (fails under CI) when ../shared is absent
    cli = f"{sys.executable} -m runtime.cli"
    proc = subprocess.run([sys.executable, str(checker), "--cli", cli, "--level", "order", case],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

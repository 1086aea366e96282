"""RAGFlow's recorded traces, replayed through our CLI by the checker that ships with them.

Each case must hold at the level listed: `order` means the exact event sequence RAGFlow emitted,
`nodes` every component's outputs and which components started (see ../shared/parity/README.md).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import shared_dir

EXPECTED_LEVEL = {
    "linear": "order",
    "multiturn": "order",
    "categorize": "order",
    "categorize_fallback": "order",
    "switch_and": "order",
    "switch_or": "order",
    "aggregator": "order",
    "data_nodes": "order",
    "template_customer_feedback_dispatcher": "order",
    "template_data_analysis_beginner_assistant": "order",
    "iteration": "order",
    "loop": "order",
    "userfillup": "order",
    "exception_goto": "order",
    "exception_default": "order",
}


@pytest.mark.parity
@pytest.mark.parametrize("case", sorted(EXPECTED_LEVEL))
def test_recorded_trace_holds(case: str) -> None:
    checker = shared_dir() / "parity" / "check.py"
    cli = f"{sys.executable} -m runtime.cli"
    proc = subprocess.run([sys.executable, str(checker), "--cli", cli, "--level", EXPECTED_LEVEL[case], case],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

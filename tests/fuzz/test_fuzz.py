"""The fuzz properties, a few hundred examples each, in every test run (a few minutes in all).

`CANVAS2GRAPH_FUZZ_SCALE=10` runs ten times as many; `python -m tests.fuzz` runs the long survey.
Failures shrink to a minimal example, which then belongs in tests/fuzz/test_regressions.py.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import strategies as S
from tests.fuzz.cli import command_lines, run_cli
from tests.fuzz.http import Target, requests
from tests.fuzz.properties import check_compile, check_run

SCALE = float(os.environ.get("CANVAS2GRAPH_FUZZ_SCALE", "1"))


def fuzz(examples: int):
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


@fuzz(400)
@given(st.one_of(S.documents(), S.texts_of()))
def test_diagnose_returns_diagnostics_or_a_graph_for_any_document(doc):
    check_compile(doc)


@fuzz(150)
@given(S.mutants(mild=True), S.queries(), S.scripts(), S.form_inputs())
def test_every_turn_ends_finished_paused_or_stopped_with_a_reason(doc, query, script, inputs):
    check_run(doc, query, script, inputs)


@pytest.fixture(scope="module")
def target():
    running = Target()
    yield running
    running.close()


@fuzz(120)
@given(request=requests())
def test_no_request_gets_a_500_and_the_server_keeps_answering(target, request):
    target.send(*request)


CLI_FOLDER = Path(tempfile.gettempdir()) / f"c2g-cli-fuzz-{os.getpid()}"     # the strategy names files in it


@pytest.fixture(scope="module")
def cli_folder():
    CLI_FOLDER.mkdir(exist_ok=True)
    yield CLI_FOLDER
    shutil.rmtree(CLI_FOLDER, ignore_errors=True)      # the suite leaves nothing in the temporary folder


@fuzz(40)
@given(argv=command_lines(CLI_FOLDER))
def test_the_command_line_exits_with_a_status_and_never_a_traceback(cli_folder, argv):
    run_cli(argv)

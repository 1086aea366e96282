"""What a newcomer meets on the command line: the help lists every command, a misspelt option gets a
suggestion from the command it belongs to, a refused run prints no session, export says what it wrote,
a run says which tools ran, and a connection error names the host it tried."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO, need_sandbox


def cli(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "canvas2graph.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env})


def test_the_help_summary_names_every_command(tmp_path):
    from canvas2graph.cli.parser import parser
    commands = next(a for a in parser()._actions if a.dest == "command").choices
    out = " ".join(cli(tmp_path, "--help").stdout.split())
    summary = out[out.index("COMMAND "):out.index("COMMAND --help says more")]
    assert {"langgraph", "templates", "compile", "run", "serve"} <= set(commands)
    assert all(name in summary for name in commands)


def test_version_says_which_canvas2graph_this_is(tmp_path):
    from importlib.metadata import version
    done = cli(tmp_path, "--version")
    assert done.returncode == 0 and done.stdout == f"canvas2graph {version('canvas2graph')}\n"


def test_a_misspelt_option_is_reported_by_its_command_with_a_suggestion(tmp_path):
    done = cli(tmp_path, "run", "fixtures/demo/support_desk.json", "--qurey", "hi")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: canvas2graph run ")
    assert "unrecognized arguments: --qurey hi" in done.stderr and "--qurey: did you mean --query?" in done.stderr


def test_a_run_refused_before_it_starts_prints_no_session(tmp_path):
    done = cli(tmp_path, "run", "fixtures/demo/support_desk.json", "--llm-script", "fixtures/demo/support_desk.script.json")
    assert done.returncode == 2 and done.stdout == ""
    assert "is a conversational agent: give the user's message with --query" in done.stderr


def test_export_says_what_it_wrote(tmp_path):
    out = tmp_path / "desk.mmd"
    done = cli(tmp_path, "export", "fixtures/demo/support_desk.json", "--out", str(out))
    assert done.returncode == 0 and out.read_text().startswith("flowchart")
    assert done.stdout == "" and done.stderr == f"wrote {out} (mermaid, {out.stat().st_size:,} bytes, 6 components)\n"


def test_the_data_analyst_shows_that_its_code_ran_with_the_reasoning_hidden(tmp_path):
    need_sandbox()
    done = cli(tmp_path, "run", "fixtures/demo/data_analyst.json", "--llm-script", "fixtures/demo/data_analyst.script.json",
               "--query", "Mean and median of 3, 8, 8, 12, 40?", "--db", str(tmp_path / "s.db"),
               CANVAS2GRAPH_ARTIFACTS_DIR=str(tmp_path / "artifacts"))
    assert done.returncode == 0, done.stderr
    assert "┆ Running the execute_code_0 tool...\n│ The mean is 14.2" in done.stdout


def test_a_connection_error_names_the_host_it_tried(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = cli(tmp_path, "run", "fixtures/demo/support_desk.json", "--query", "My invoice is wrong", "--db",
               str(tmp_path / "s.db"), OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1")
    assert done.returncode == 1
    assert f"Connection error. (tried http://127.0.0.1:{port})" in done.stdout


def _refused(args) -> int:
    import psycopg
    raise psycopg.OperationalError('connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, too '
                                   "many clients already")


def test_a_database_that_refuses_connections_is_named_as_such_not_as_an_internal_error(capsys):
    import argparse

    from canvas2graph.cli import dispatch
    assert dispatch(argparse.Namespace(func=f"{__name__}:_refused", file=None)) == 1
    err = capsys.readouterr().err
    assert err.startswith("canvas2graph: the database did not answer (connection to server") and "too many clients" in err
    assert "internal error" not in err and "max_connections" in err

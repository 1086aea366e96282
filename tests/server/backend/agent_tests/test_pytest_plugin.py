"""pytest collects case folders through the plugin installed with the package (entry point `pytest11`):
a passing case passes, a failing one fails with what differs, and other tools' `case.json` files are left
alone."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from canvas2graph.cli import main

REPO = Path(__file__).resolve().parents[4]
DEMO = REPO / "fixtures" / "demo" / "support_desk.json"
DEMO_SCRIPT = REPO / "fixtures" / "demo" / "support_desk.script.json"


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest as a user runs it in their own project (no conftest of ours), the plugin found by its entry point."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=folder,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(folder), "CANVAS2GRAPH_FILES_DIR": str(folder / "files")})


def test_pytest_runs_case_folders_and_shows_what_differs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FILES_DIR", str(tmp_path / "files"))
    project = tmp_path / "project"
    db = str(tmp_path / "sessions.db")
    assert main(["run", str(DEMO), "--llm-script", str(DEMO_SCRIPT), "--query", "Why was I charged twice?",
                 "--session", "s1", "--db", db]) == 0
    assert main(["record", "--session", "s1", "--db", db, "--dsl", str(DEMO), "--out", str(project / "cases" / "billing"),
                 "--name", "billing question"]) == 0
    capsys.readouterr()
    shutil.copytree(project / "cases" / "billing", project / "cases" / "billing_changed")
    changed = project / "cases" / "billing_changed" / "agent.json"
    dsl = json.loads(changed.read_text())
    dsl["components"]["Categorize:Desk"]["obj"]["params"]["category_description"]["billing"]["to"] = ["LLM:Technical"]
    changed.write_text(json.dumps(dsl))
    (project / "cases" / "other").mkdir()
    (project / "cases" / "other" / "case.json").write_text('{"some": "other tool"}')

    done = pytest_in(project, "cases")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout
    assert "FAILED cases/billing_changed/case.json::billing_changed" in done.stdout
    assert "turn 1: path: expected begin > Categorize:Desk > LLM:Billing > Message:Answer" in done.stdout

    done = pytest_in(project, "cases/billing", "--canvas2graph-dsl", str(changed))
    assert done.returncode == 1 and "turn 1: component LLM:Billing did not run" in done.stdout

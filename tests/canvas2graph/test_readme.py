"""The README's Python API example runs as written, from a fresh interpreter in the repository."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_example(heading: str) -> str:
    """The first ```python block after `heading` in README.md."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_python_api_example_runs_as_written(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_example("## Python API"))
    done = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Desk: (billing)"                # the first turn's answer, from the demo's script
    assert "The customer sees two charges" in done.stdout
    assert "workflow_started " in lines and "node_started begin" in lines and "workflow_finished " in lines
    assert lines[-1] == "2"                             # the second turn continued the thread


def test_the_eject_example_runs_as_written(tmp_path):
    """The README's eject lines, run by the shell in a folder laid out like a fresh clone."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Eject to Python"):]
    commands = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "support_desk.py").read_text(encoding="utf-8").startswith('"""A RAGFlow agent canvas ejected')
    assert "You were charged twice" in done.stdout


def test_the_ingest_example_runs_as_written(tmp_path):
    """The README's ingest line: a pipeline over the demo documents, then the demo agent answering from them."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Ingestion pipelines"):]
    commands = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    # a retrieval may take its first tokenizer load on a busy test machine: more than RAGFlow's 12 s
    (tmp_path / "retrieval.toml").write_text("timeout = 120\n")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                            "CANVAS2GRAPH_RETRIEVAL_CONFIG": str(tmp_path / "retrieval.toml")})
    assert done.returncode == 0, done.stderr
    assert "support-kb: 3 file(s) ingested (3 chunks), 0 unchanged, 0 failed" in done.stdout
    assert (tmp_path / ".canvas2graph" / "retrieval.db").is_file()
    assert "✓ Retrieval:Docs" in done.stdout and "Title: refunds.md" in done.stdout      # found the ingested chunk
    assert "The second charge is reversed automatically" in done.stdout


def test_the_testing_example_records_tests_and_evaluates_as_written(tmp_path):
    """The README's record, test and eval lines, run by the shell in a folder laid out like a fresh clone."""
    import json
    import xml.etree.ElementTree as ET
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Testing and evaluating agents"):]
    commands = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    case = json.loads((tmp_path / "cases" / "billing" / "case.json").read_text(encoding="utf-8"))
    assert case["turns"][0]["expect"]["path"] == ["begin", "Categorize:Desk", "LLM:Billing", "Message:Answer"]
    assert "PASS session billing-1 (cases/billing)" in done.stdout and "1 case(s): 1 passed, 0 failed" in done.stdout
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == "0"
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [row["score"] for row in report["rows"]] == [1.0, 1.0, 1.0, 1.0, 0.5, 0.0]
    assert report["summary"]["score"] == 0.75 and report["summary"]["cost"] > 0
    assert "fixtures/demo/support_desk.json: score 0.75 over 6 scored row(s) of 6 (4 passed)" in done.stdout

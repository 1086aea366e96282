"""The light install: `pip install -e .` runs the demos; each extra (retrieval, browser, finance) is imported
only where it is used, and a run without it says which extra to install.

A fresh minimal virtual environment is what the README measures; here the extras' absence is simulated
in a child interpreter by hiding their top-level modules (`sys.modules[name] = None` makes `import name`
fail and `importlib.util.find_spec(name)` answer None, as when the package is not installed).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib

from tests.conftest import REPO, cpn, dsl

# the top-level modules each extra brings, and the modules only they bring in turn
EXTRA_MODULES = {
    "retrieval": ["infinity", "nltk", "datrie", "hanziconv", "pyarrow", "polars", "sqlglot"],
    "browser": ["playwright"],
    "finance": ["akshare", "pywencai"],
}
HIDDEN = [m for modules in EXTRA_MODULES.values() for m in modules]


def without_extras(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    """`canvas2graph ARGV...` in a child interpreter that has none of the extras' modules."""
    code = (f"import sys; sys.modules.update(dict.fromkeys({HIDDEN!r}, None)); "
            "from canvas2graph.cli import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)})


def test_the_core_dependencies_leave_the_heavy_packages_to_extras_the_test_extra_pulls_in():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = " ".join(project["dependencies"])
    for package in ("infinity-sdk", "nltk", "playwright", "akshare", "pywencai", "pyarrow", "polars"):
        assert package not in core, package
    extras = project["optional-dependencies"]
    assert any(d.startswith("infinity-sdk") for d in extras["retrieval"])
    assert any(d.startswith("playwright") for d in extras["browser"])
    assert any(d.startswith("akshare") for d in extras["finance"])
    assert "canvas2graph[retrieval,browser,finance,ingest]" in extras["test"]


def test_the_demo_runs_without_any_extra(tmp_path):
    done = without_extras(tmp_path, "run", "fixtures/demo/support_desk.json", "--llm-script",
                          "fixtures/demo/support_desk.script.json", "--query", "The app crashes on start",
                          "--db", str(tmp_path / "s.db"), "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    assert '"LLM:Technical"' in done.stdout and "stale cache" in done.stdout


def test_every_component_compiles_without_the_extras(tmp_path):
    source = tmp_path / "all.json"
    source.write_text(json.dumps(dsl(**{
        "Retrieval:R": cpn("Retrieval", {"kb_ids": ["kb"]}, ["Browser:B"]),
        "Browser:B": cpn("Browser", {"llm_id": "m@OpenAI"}, ["AkShare:A"]),
        "AkShare:A": cpn("AkShare", {}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["{Browser:B@content}"]}),
    })))
    done = without_extras(tmp_path, "compile", str(source))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "compiles (5 components" in done.stdout


def test_retrieval_without_its_extra_names_the_extra(tmp_path):
    hint = "pip install 'canvas2graph[retrieval]'"
    index = without_extras(tmp_path, "index", "fixtures/kb/docs", "--kb", "support-kb", "--db", str(tmp_path / "s.db"),
                           "--quiet")
    assert index.returncode == 1 and hint in index.stderr and "Traceback" not in index.stderr, index.stderr
    run = without_extras(tmp_path, "run", "fixtures/kb/kb_answer.json", "--llm-script", "fixtures/kb/kb_answer.script.json",
                         "--query", "I was charged twice", "--db", str(tmp_path / "s.db"), "--format", "jsonl")
    failed = next(json.loads(line)["data"] for line in run.stdout.splitlines()
                  if '"node_finished"' in line and '"Retrieval:Docs"' in line)
    assert hint in failed["error"], failed


def test_the_browser_without_playwright_names_the_extra(tmp_path):
    source = tmp_path / "browser.json"
    source.write_text(json.dumps(dsl(**{"Browser:B": cpn("Browser", {"llm_id": "m@OpenAI", "persist_session": False})})))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": ["unused"]}))
    done = without_extras(tmp_path, "run", str(source), "--llm-script", str(script), "--query", "Open the page",
                          "--db", str(tmp_path / "s.db"), "--format", "jsonl")
    failed = next(json.loads(line)["data"] for line in done.stdout.splitlines()
                  if '"node_finished"' in line and '"Browser:B"' in line)
    assert "pip install 'canvas2graph[browser]'" in failed["error"], done.stdout + done.stderr

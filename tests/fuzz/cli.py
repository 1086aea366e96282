"""Command-line fuzzing: generated argument lists for `canvas2graph`, run in-process.

Property: the exit status is 0, 1, 2 or 130 (never 3, an internal error), nothing is a traceback, and
everything printed is encodable UTF-8 (the command escapes what the terminal cannot show).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz import strategies as S

SCRIPT = {"auto_reply": "ok {n}"}


@st.composite
def command_lines(draw, folder: Path) -> list[str]:
    doc = draw(st.one_of(S.documents(), S.texts_of()))
    path = folder / f"dsl-{draw(st.integers(0, 3))}.json"
    path.write_bytes(doc if isinstance(doc, bytes) else (doc if isinstance(doc, str) else json.dumps(
        doc, allow_nan=True)).encode("utf-8", "surrogatepass"))
    text = st.one_of(S.texts(), st.sampled_from(["-", "", "--", "--query", "x" * 300]))
    command = draw(st.sampled_from(["compile", "export", "run", "run", "tokens"]))
    if command == "tokens":
        return ["tokens", draw(st.sampled_from(["list", "revoke", "create"])), "--db", str(folder / "t.db"),
                *draw(st.sampled_from([[], ["--tenant", "a"], ["nope"]]))]
    argv = [command, str(path) if draw(st.booleans()) else draw(text)]
    if command == "compile":
        argv += draw(st.sampled_from([[], ["--format", "json"], ["--format", "xml"], ["--default-llm", "m@OpenAI"]]))
    elif command == "export":
        argv += draw(st.sampled_from([[], ["--format", "json"], ["--format", "mermaid"]]))
    else:
        script = folder / "script.json"
        script.write_text(json.dumps(SCRIPT))
        argv += ["--db", str(folder / "s.db"), "--llm-script", str(script), "--query", draw(text),
                 "--format", draw(st.sampled_from(["jsonl", "pretty"]))]
        argv += draw(st.sampled_from([[], ["--inputs", str(path)], ["--session", draw(text) or "s"], ["--show-thinking"]]))
    return argv


def run_cli(argv: list[str]) -> str:
    from canvas2graph.cli import main
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="strict", write_through=True)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = main(argv)
        except SystemExit as e:              # argparse's usage errors
            status = e.code if isinstance(e.code, int) else 2
    text = out.getvalue().decode("utf-8") + err.getvalue().decode("utf-8")
    assert status in (0, 1, 2, 130), f"exit {status}: {text[-500:]}"
    assert "Traceback" not in text and "internal error" not in text, text[-500:]
    return str(status)


def survey_cli(examples: int, seed: int, survey) -> dict:
    from tests.fuzz.__main__ import _run
    folder = Path(tempfile.mkdtemp(prefix="c2g-cli-fuzz-"))
    try:
        _run(st.tuples(command_lines(folder)), examples, lambda argv: survey.check(run_cli, argv), seed)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return survey.report()

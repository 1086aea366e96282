"""RAGFlow's recorded traces, replayed through our CLI by the checker that ships with them.

One folder of cases, `tests/parity/cases`: the project's own (recorded with the oracle for what the shared
set does not cover) and copies of the shared ones (`../shared/parity/cases`, listed in `shared_cases.json`),
checked with a copy of the shared checker (`check.py`), so a clone without `../shared` runs them all; when
`../shared` is there, the copies must still equal it. Every case must hold at the `order` level: the exact event sequence RAGFlow emitted, which includes
every component's outputs and which components started (see ../shared/parity/README.md). A project
case whose outputs are random in both engines (a generated document's id) names a lower level and
why in its case.json (`level`, `level_reason`). A project case may also carry `deviations.json`: canvas2graph's
deliberate differences from RAGFlow (docs/compatibility.md) as regular-expression substitutions on the
recorded trace; the case is checked against RAGFlow's trace with exactly those changes, so everything
else still holds at its level. A case added to either folder is checked without being listed here.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import shared_dir

HERE = Path(__file__).resolve().parent
PROJECT_CASES = HERE / "cases"
CHECKER = HERE / "check.py"            # ../shared/parity/check.py, copied (see its header)
SHARED_LIST = HERE / "shared_cases.json"


def _cases(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _check(cases_dir: Path, case: str, level: str) -> None:
    cli = " ".join([*forkserver.python(), "-m", "canvas2graph.cli"])
    # recorded offline, where tools have no keys: a key in the caller's environment (TAVILY_API_KEY, say)
    # would make a tool that failed in RAGFlow's recording try the network instead
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN", "_SECRET_KEY", "_COOKIE"))}
    proc = subprocess.run([sys.executable, str(CHECKER), "--cases", str(cases_dir), "--cli", cli, "--level", level, case],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_copied_checker_and_cases_match_shared() -> None:
    """The copies in this repository are what ../shared holds (skipped, saying so, in a clone without it)."""
    shared = shared_dir() / "parity"
    listed = json.loads(SHARED_LIST.read_text(encoding="utf-8"))["cases"]
    assert sorted(listed) == _cases(shared / "cases"), "shared_cases.json no longer lists ../shared/parity/cases"
    for case in listed:
        assert _tree(PROJECT_CASES / case) == _tree(shared / "cases" / case), f"{case} differs from ../shared"
    ours = CHECKER.read_text(encoding="utf-8").splitlines(keepends=True)
    assert ours[:1] + ours[4:] == (shared / "check.py").read_text(encoding="utf-8").splitlines(keepends=True)


def _substitute(value, pattern: re.Pattern, replacement: str, hits: list[int]):
    """`value` with every string in it (keys aside) rewritten; counts the rewrites in `hits`."""
    if isinstance(value, str):
        new, n = pattern.subn(replacement, value)
        hits[0] += n
        return new
    if isinstance(value, list):
        return [_substitute(v, pattern, replacement, hits) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, pattern, replacement, hits) for k, v in value.items()}
    return value


def with_deviations(case_dir: Path, into: Path) -> Path:
    """A copy of the case under `into` whose recorded traces carry canvas2graph's stated deviations.

    Each substitution must change the trace: one that no longer matches anything is stale.
    """
    spec = json.loads((case_dir / "deviations.json").read_text(encoding="utf-8"))
    assert spec.get("reason") and spec.get("substitutions"), f"{case_dir.name}: deviations.json needs a reason and substitutions"
    copy = into / case_dir.name
    shutil.copytree(case_dir, copy)
    for turn in json.loads((case_dir / "case.json").read_text(encoding="utf-8"))["turns"]:
        events = [json.loads(line) for line in (case_dir / turn["expected"]).read_text(encoding="utf-8").splitlines() if line.strip()]
        for sub in spec["substitutions"]:
            hits = [0]
            events = _substitute(events, re.compile(sub["pattern"], re.DOTALL), sub["replacement"], hits)
            assert hits[0], f"{case_dir.name}: the deviation {sub['pattern']!r} no longer changes {turn['expected']}"
        (copy / turn["expected"]).write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    return copy


@pytest.mark.parity
@pytest.mark.parametrize("case", _cases(PROJECT_CASES))
def test_projects_recorded_trace_holds(case: str, tmp_path: Path) -> None:
    spec = json.loads((PROJECT_CASES / case / "case.json").read_text(encoding="utf-8"))
    level = spec.get("level", "order")
    if level != "order":
        assert spec.get("level_reason"), f"{case}: a case below the order level must say why (level_reason)"
    cases_dir = PROJECT_CASES
    if (PROJECT_CASES / case / "deviations.json").exists():
        cases_dir = with_deviations(PROJECT_CASES / case, tmp_path).parent
    _check(cases_dir, case, level)

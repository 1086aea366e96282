"""docs/security.md stays true: every test it cites exists, and every component that connects through the
host guard has a row in its table of outbound connections."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
CITED = re.compile(r"(tests/[\w/]+\.py)::(test_\w+)")
BARE = re.compile(r"`(test_\w+)`")
GUARD_USER = re.compile(r"HostGuard(?:\.of)?\(\s*\"(\w+)\"")


def defined(path: Path, name: str) -> bool:
    return re.search(rf"^(async )?def {name}\(", path.read_text(encoding="utf-8"), re.M) is not None


def test_every_test_the_page_cites_exists():
    cited = CITED.findall(DOC)
    assert len(cited) > 20
    missing = [f"{path}::{name}" for path, name in cited if not defined(REPO / path, name)]
    assert missing == []


def test_the_hostile_script_table_names_tests_of_the_hostile_suite():
    suite = REPO / "tests/runtime/services/test_sandbox_hostile.py"
    section = DOC.split("### Hostile scripts", 1)[1].split("###", 1)[0]
    names = [n for n in BARE.findall(section)]
    assert len(names) >= 10
    assert [n for n in names if not defined(suite, n)] == []


def test_every_component_using_the_guard_has_a_row_in_the_table():
    users = set()
    for package in ("nodes", "runtime", "server"):
        for path in (REPO / package).rglob("*.py"):
            if path == REPO / "runtime" / "services" / "netguard.py":       # the guard itself (its docstring's example)
                continue
            users |= set(GUARD_USER.findall(path.read_text(encoding="utf-8")))
    assert {"Invoke", "Crawler", "SearXNG", "Email", "ExeSQL", "MCP"} <= users
    table = DOC.split("## The host guard", 1)[1].split("###", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| connection")]
    first_cells = [row.split("|")[1] for row in rows]
    missing = [name for name in sorted(users) if not any(name in cell for cell in first_cells)]
    assert missing == [], f"add a row to docs/security.md for {missing}"
    assert all(CITED.search(row) for row in rows), "every row names its test"

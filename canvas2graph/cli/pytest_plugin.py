"""pytest collects regression case folders: every `case.json` of canvas2graph's case format under the
paths pytest searches is one test, which fails saying what differs (as `canvas2graph test` does).

Installed with the package (the `pytest11` entry point `canvas2graph`), so `pytest cases/` runs a folder
of cases. `--canvas2graph-dsl FILE` runs them against another DSL (the changed agent), and
`--canvas2graph-db` names the database of the stored agents cases refer to. Nothing heavy is imported
until a case runs: other projects' test runs pay for this plugin with one file-name check per file.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from canvas2graph.server.backend.agent_tests.case import CASE_FILE, CaseError, is_case_file

__all__ = ["CaseFile", "CaseItem"]


def pytest_addoption(parser) -> None:
    group = parser.getgroup("canvas2graph", "canvas2graph regression cases")
    group.addoption("--canvas2graph-dsl", default=None, metavar="DSL",
                    help="run canvas2graph cases against this DSL instead of their own")
    group.addoption("--canvas2graph-db", default=None, metavar="DB",
                    help="the database holding the stored agents canvas2graph cases refer to "
                         "(default $CANVAS2GRAPH_DB, else ~/.canvas2graph/sessions.db)")


def pytest_collect_file(file_path: Path, parent):
    if file_path.name == CASE_FILE and is_case_file(file_path):
        return CaseFile.from_parent(parent, path=file_path)
    return None


class CaseFailed(Exception):
    """A case that ran and differs: its report is the failure pytest shows."""


class CaseFile(pytest.File):
    def collect(self):
        yield CaseItem.from_parent(self, name=self.path.parent.name)


class CaseItem(pytest.Item):
    def runtest(self) -> None:
        from canvas2graph.server.backend.agent_tests.case import load_case
        from canvas2graph.server.backend.agent_tests.replay import run_case
        case = load_case(self.path.parent)
        from canvas2graph.cli.parser import default_db
        config = self.config
        result = asyncio.run(run_case(case, dsl=config.getoption("canvas2graph_dsl"),
                                      db=config.getoption("canvas2graph_db") or default_db()))
        if not result.passed:
            raise CaseFailed(f"case {case.name} ({case.folder}):\n{result.report()}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (CaseFailed, CaseError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"canvas2graph case {self.name}"

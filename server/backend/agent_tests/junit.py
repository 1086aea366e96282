"""Case results as a JUnit XML report (`canvas2graph test --junit FILE`), the format CI systems read:
one `<testcase>` per case, a `<failure>` holding what differs, an `<error>` for a case that could not run."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

__all__ = ["write_junit"]


def write_junit(results: list, path: str | Path, seconds: list[float]) -> None:
    failures = sum(1 for r in results if r.error is None and not r.passed)
    errors = sum(1 for r in results if r.error is not None)
    suite = ET.Element("testsuite", name="canvas2graph", tests=str(len(results)), failures=str(failures),
                       errors=str(errors), time=f"{sum(seconds):.3f}")
    for result, elapsed in zip(results, seconds):
        case = ET.SubElement(suite, "testcase", classname=str(result.case.folder), name=result.case.name,
                             time=f"{elapsed:.3f}")
        if result.error is not None:
            ET.SubElement(case, "error", message=result.error.splitlines()[0]).text = result.error
        elif not result.passed:
            report = result.report()
            ET.SubElement(case, "failure", message=report.splitlines()[0]).text = report
    ET.indent(suite)
    Path(path).write_bytes(ET.tostring(suite, encoding="utf-8", xml_declaration=True) + b"\n")

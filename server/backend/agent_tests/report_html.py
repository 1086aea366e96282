"""An evaluation report (or a comparison of two) as one self-contained HTML page: the summary, then a
table of rows with their scores (or of the rows that changed). Every value is escaped."""
from __future__ import annotations

import json
from html import escape
from typing import Any

__all__ = ["to_html"]

STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}th{background:#f3f3f3}
.bad{background:#fde8e8}.good{background:#e8f6e8}pre{white-space:pre-wrap;margin:0}"""


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"<td><pre>{escape(text)}</pre></td>"


def _summary(summary: dict) -> str:
    items = "".join(f"<tr><th>{escape(k)}</th>{_cell(v)}</tr>" for k, v in summary.items())
    return f"<table>{items}</table>"


def _report(report: dict) -> str:
    head = "<tr><th>row</th><th>query</th><th>expected</th><th>answer</th><th>score</th><th>status</th><th>ms</th></tr>"
    body = []
    for r in report["rows"]:
        kind = "good" if r["score"] == 1 else "bad" if r["score"] is not None and r["score"] < 1 else ""
        body.append(f'<tr class="{kind}"><td>{r["row"]}</td>{_cell(r["query"])}{_cell(r["expected"])}'
                    f'{_cell(r["answer"])}{_cell(r["score"])}{_cell(r["status"])}{_cell(r["latency_ms"])}</tr>')
    return (f"<h1>Evaluation of {escape(str(report['dsl']))}</h1><p>metric: {escape(report['metric'])}</p>"
            f"{_summary(report['summary'])}<h2>Rows</h2><table>{head}{''.join(body)}</table>")


def _comparison(comparison: dict) -> str:
    a, b = comparison["a"], comparison["b"]
    head = "<tr><th>row</th><th>query</th><th>change</th><th>A answer</th><th>A score</th><th>B answer</th><th>B score</th></tr>"
    body = [f'<tr class="{"good" if c["change"] == "better" else "bad" if c["change"] == "worse" else ""}">'
            f'<td>{c["row"]}</td>{_cell(c["query"])}{_cell(c["change"])}{_cell(c["a"]["answer"])}{_cell(c["a"]["score"])}'
            f'{_cell(c["b"]["answer"])}{_cell(c["b"]["score"])}</tr>' for c in comparison["changed"]]
    return (f"<h1>A: {escape(str(a['dsl']))} / B: {escape(str(b['dsl']))}</h1>{_summary(comparison['summary'])}"
            f"<h2>A</h2>{_summary(a['summary'])}<h2>B</h2>{_summary(b['summary'])}"
            f"<h2>Rows that changed</h2><table>{head}{''.join(body)}</table>")


def to_html(report: dict) -> str:
    body = _comparison(report) if report.get("format") == "canvas2graph-eval-comparison" else _report(report)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>canvas2graph evaluation</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")

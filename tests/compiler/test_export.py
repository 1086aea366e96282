"""Exports of the compiled plan: Mermaid draws every branch with its label; JSON lists nodes and edges."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.compiler.export import to_json, to_mermaid
from tests.conftest import REPO, cpn, dsl, shared_dir


def switch_dsl() -> dict:
    return dsl(**{
        "Switch:S": cpn("Switch", {
            "conditions": [
                {"to": ["Message:A"], "items": [{"cpn_id": "sys.query", "operator": "contains", "value": "a"}]},
                {"to": ["Message:A", "Message:B"], "items": [{"cpn_id": "sys.query", "operator": "empty"}]}],
            "end_cpn_ids": ["Message:B"]}),
        "Message:A": cpn("Message", {"content": ["a"]}),
        "Message:B": cpn("Message", {"content": ["b"]}),
    })


def categorize_dsl(*names: str) -> dict:
    cats = {name: {"description": name, "to": [f"Message:{i}"]} for i, name in enumerate(names)}
    comps = {"Categorize:C": cpn("Categorize", {"llm_id": "m", "category_description": cats})}
    comps.update({f"Message:{i}": cpn("Message", {"content": [name]}) for i, name in enumerate(names)})
    return dsl(**comps)


def mermaid(doc: dict) -> str:
    return to_mermaid(compile_dsl(doc).plan)


def node_ids(text: str) -> dict[str, str]:
    """Mermaid node id -> its label's first part (the display name or component id)."""
    return {m.group(1): m.group(2) for m in re.finditer(r'^\s+(n\d+)\["([^"<]*)<br/>', text, re.M)}


def labelled_edges(text: str) -> set[tuple[str, str, str]]:
    ids = node_ids(text)
    return {(ids[a], label, ids[b]) for a, label, b in re.findall(r'^\s+(n\d+) -\. "([^"]*)" \.-> (n\d+)$', text, re.M)}


def plain_edges(text: str) -> set[tuple[str, str]]:
    ids = {**node_ids(text), "finish": "finish"}
    return {(ids[a], ids[b]) for a, b in re.findall(r"^\s+(n\d+) --> (n\d+|finish)$", text, re.M)}


# --- mermaid -----------------------------------------------------------------------------------

def test_mermaid_is_a_top_down_flowchart_with_a_finish_node():
    text = mermaid(switch_dsl())
    assert text.startswith("flowchart TD\n") and "    finish([finish])" in text


def test_mermaid_draws_every_component_with_its_type():
    text = mermaid(switch_dsl())
    assert set(node_ids(text).values()) == {"begin", "Switch:S", "Message:A", "Message:B"}
    assert "<small>Switch</small>" in text and "<small>Message</small>" in text


def test_mermaid_draws_every_switch_case_and_the_else_branch_with_labels():
    assert labelled_edges(mermaid(switch_dsl())) == {
        ("Switch:S", "Case 1", "Message:A"), ("Switch:S", "Case 2", "Message:A"),
        ("Switch:S", "Case 2", "Message:B"), ("Switch:S", "else", "Message:B")}


def test_mermaid_draws_every_category_with_its_name():
    assert labelled_edges(mermaid(categorize_dsl("billing", "tech", "other"))) == {
        ("Categorize:C", "billing", "Message:0"), ("Categorize:C", "tech", "Message:1"),
        ("Categorize:C", "other", "Message:2")}


def test_mermaid_draws_plain_downstream_and_finish_edges_solid():
    assert plain_edges(mermaid(switch_dsl())) == {
        ("begin", "Switch:S"), ("Message:A", "finish"), ("Message:B", "finish")}


def test_mermaid_does_not_draw_a_branching_component_downstream_list():
    doc = switch_dsl()
    doc["components"]["Switch:S"]["downstream"] = ["Message:A", "Message:B"]   # ignored by RAGFlow
    assert ("Switch:S", "Message:A") not in plain_edges(mermaid(doc))


def test_mermaid_labels_escape_quotes_and_line_breaks():
    text = mermaid(categorize_dsl('say "hi"\nplease', "other"))
    assert '-. "say #quot;hi#quot; please" .->' in text
    assert all(line.count('"') % 2 == 0 for line in text.splitlines())


def test_mermaid_uses_display_names_from_the_graph():
    doc = switch_dsl()
    doc["graph"] = {"nodes": [{"id": "Switch:S", "data": {"label": "Switch", "name": "Route it"}}], "edges": []}
    assert "Route it<br/><small>Switch</small>" in mermaid(doc)


def test_mermaid_of_customer_feedback_dispatcher_shows_every_category():
    path = shared_dir() / "ragflow" / "templates" / "customer_feedback_dispatcher.json"
    # its two Categorize components ship without a model: a default one fills them
    plan = compile_dsl(json.loads(path.read_text(encoding="utf-8")), default_llm="gpt-4o@OpenAI").plan
    edges = labelled_edges(to_mermaid(plan))
    assert {label for _, label, _ in edges} == {"Negative review ", "Positive review", "After-sales issues",
                                                "Transportation issue"}


# --- json --------------------------------------------------------------------------------------

def test_json_export_lists_every_node_with_id_langgraph_name_type_and_parent():
    nodes = to_json(compile_dsl(switch_dsl()).plan)["nodes"]
    assert [(n["id"], n["node"], n["type"], n["parent_id"]) for n in nodes] == [
        ("begin", "begin", "Begin", None), ("Switch:S", "Switch.S", "Switch", None),
        ("Message:A", "Message.A", "Message", None), ("Message:B", "Message.B", "Message", None)]


def test_json_export_lists_every_edge_with_kind_and_branch_label():
    edges = to_json(compile_dsl(switch_dsl()).plan)["edges"]
    assert {"source": "begin", "target": "Switch:S", "kind": "next"} in edges
    assert {"source": "Switch:S", "target": "Message:B", "kind": "route", "label": "else"} in edges
    assert len([e for e in edges if e["kind"] == "route"]) == 4


def test_json_export_names_the_entry_and_is_serialisable():
    out = to_json(compile_dsl(categorize_dsl("a", "b")).plan)
    assert out["entry"] == "begin"
    assert json.loads(json.dumps(out)) == out


# --- the export command ------------------------------------------------------------------------

def run_cli(*args: str, tmp_path: Path, doc) -> subprocess.CompletedProcess:
    path = tmp_path / "dsl.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CANVAS2GRAPH_DEBUG"}
    return subprocess.run([sys.executable, "-m", "canvas2graph.cli", "export", str(path), *args], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=120)


def test_export_command_prints_mermaid(tmp_path):
    result = run_cli(tmp_path=tmp_path, doc=switch_dsl())
    assert result.returncode == 0 and result.stdout == mermaid(switch_dsl())


def test_export_command_prints_json(tmp_path):
    result = run_cli("--format", "json", tmp_path=tmp_path, doc=switch_dsl())
    assert result.returncode == 0 and json.loads(result.stdout) == to_json(compile_dsl(switch_dsl()).plan)


def test_export_of_a_dsl_that_does_not_compile_prints_diagnostics_and_exits_1(tmp_path):
    result = run_cli(tmp_path=tmp_path, doc=dsl(**{"Bing:B": cpn("Bing")}))
    assert result.returncode == 1 and result.stdout == ""
    assert "Bing:B / obj.component_name" in result.stderr and "[no-engine-class]" in result.stderr
    assert "Traceback" not in result.stderr

"""Pictures of the compiled graph, laid out by Graphviz from the plan: every component with its name and
type, every branch label (Switch cases, categories, container passes, error gotos), Iteration and Loop
as clusters; SVG and PNG, from the command line too.

Drawing needs Graphviz's `dot`: these tests skip without it, and fail under CI=true (.ci/run installs it).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.compiler.export import to_json
from canvas2graph.compiler.picture import DrawingError, render, to_dot
from tests.conftest import REPO, cpn, require_graphviz

SVG = "{http://www.w3.org/2000/svg}"

NAMES = {"Categorize:Route": "Pick a desk", "Switch:Amount": "Big refund?", "LLM:Refund": "Refund desk",
         "Iteration:Each": "Each part", "Message:Sorry": 'Say "sorry" & <retry>'}
TYPES = {"begin": "Begin", "Categorize:Route": "Categorize", "Switch:Amount": "Switch", "LLM:Refund": "LLM",
         "StringTransform:Split": "StringTransform", "Iteration:Each": "Iteration", "IterationItem:Start": "IterationItem",
         "LLM:Describe": "LLM", "Message:Answer": "Message", "Message:Other": "Message", "Message:Sorry": "Message"}
BRANCHES = {"billing", "tech", "other", "Case 1", "else", "on error", "next pass", "done"}


def llm(downstream: list | None = None, **params) -> dict:
    return {"llm_id": "m@Scripted", "sys_prompt": "Help.", "prompts": [{"role": "user", "content": "{sys.query}"}],
            **params}


def desk_dsl() -> dict:
    """Every shape a picture must show: a Categorize into a Switch, an LLM whose failures go elsewhere,
    an Iteration with a body, a join, and display names that need escaping."""
    return {"components": {
        "begin": cpn("Begin", downstream=["Categorize:Route"]),
        "Categorize:Route": cpn("Categorize", {"llm_id": "m@Scripted", "category_description": {
            "billing": {"description": "money", "to": ["Switch:Amount"]},
            "tech": {"description": "bugs", "to": ["StringTransform:Split"]},
            "other": {"description": "anything else", "to": ["Message:Other"]}}}),
        "Switch:Amount": cpn("Switch", {
            "conditions": [{"to": ["LLM:Refund"], "items": [{"cpn_id": "sys.query", "operator": "contains",
                                                             "value": "refund"}]}],
            "end_cpn_ids": ["Message:Other"]}),
        "LLM:Refund": cpn("LLM", llm(exception_method="goto", exception_goto=["Message:Sorry"]), ["Message:Answer"]),
        "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query",
                                                         "delimiters": [","]}, ["Iteration:Each"]),
        "Iteration:Each": cpn("Iteration", {"items_ref": "StringTransform:Split@result",
                                            "outputs": {"out": {"ref": "LLM:Describe@content", "type": "Array<string>"}}},
                              ["Message:Answer"]),
        "IterationItem:Start": cpn("IterationItem", {}, ["LLM:Describe"], parent_id="Iteration:Each"),
        "LLM:Describe": cpn("LLM", llm(), parent_id="Iteration:Each"),
        "Message:Answer": cpn("Message", {"content": ["{LLM:Refund@content}{Iteration:Each@out}"]}),
        "Message:Other": cpn("Message", {"content": ["Ask a person."]}),
        "Message:Sorry": cpn("Message", {"content": ["Sorry."]}),
    }, "graph": {"nodes": [{"id": cid, "data": {"name": name}} for cid, name in NAMES.items()], "edges": []}}


def loop_in_iteration_dsl() -> dict:
    """A Loop nested in an Iteration: clusters nest as the canvas does."""
    return {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query",
                                                         "delimiters": [","]}, ["Iteration:I"]),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result", "outputs": {}}, ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, ["Loop:L"], parent_id="Iteration:I"),
        "Loop:L": cpn("Loop", {"loop_variables": [{"variable": "n", "input_mode": "constant", "type": "number",
                                                   "value": 0}],
                               "loop_termination_condition": [], "logical_operator": "and", "maximum_loop_count": 3},
                      parent_id="Iteration:I"),
        "LoopItem:LS": cpn("LoopItem", {}, ["VariableAssigner:Inc"], parent_id="Loop:L"),
        "VariableAssigner:Inc": cpn("VariableAssigner", {"variables": [
            {"variable": "Loop:L@n", "operator": "+=", "parameter": 1}]}, parent_id="Loop:L"),
        "Message:Out": cpn("Message", {"content": ["done"]}),
    }}


def svg_of(doc: dict, **kw) -> ET.Element:
    require_graphviz()
    return ET.fromstring(render(compile_dsl(doc).plan, "svg", **kw))


def groups(svg: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in svg.iter(f"{SVG}g") if g.get("class") == kind]


def texts(element: ET.Element) -> list[str]:
    return [t.text or "" for t in element.iter(f"{SVG}text")]


def title(element: ET.Element) -> str:
    return element.find(f"{SVG}title").text


def tooltip(element: ET.Element) -> str:
    """The component id a node carries as its tooltip (an SVG link title)."""
    return next(a.get("{http://www.w3.org/1999/xlink}title") for a in element.iter(f"{SVG}a"))


# --- SVG ---------------------------------------------------------------------------------------

def test_svg_draws_every_component_with_its_display_name_and_type():
    svg = svg_of(desk_dsl())
    drawn = {tooltip(g): texts(g) for g in groups(svg, "node") if title(g) != "__finish__"}
    assert set(drawn) == set(TYPES)
    for cid, ctype in TYPES.items():
        assert drawn[cid] == [NAMES.get(cid, cid), ctype], cid


def test_svg_nodes_are_the_langgraph_nodes():
    plan = compile_dsl(desk_dsl()).plan
    svg = svg_of(desk_dsl())
    assert {title(g) for g in groups(svg, "node")} == set(plan.node_names.values()) | {"__finish__"}


def test_svg_labels_every_branch_and_every_error_goto():
    svg = svg_of(desk_dsl())
    labelled = {}
    for g in groups(svg, "edge"):
        source, _, target = title(g).partition("->")
        for label in texts(g):
            labelled.setdefault(label, set()).add((source, target))
    assert set(labelled) == BRANCHES
    assert labelled["billing"] == {("Categorize.Route", "Switch.Amount")}
    assert labelled["else"] == {("Switch.Amount", "Message.Other")}
    assert labelled["on error"] == {("LLM.Refund", "Message.Sorry")}
    assert labelled["done"] == {("IterationItem.Start", "Message.Answer")}


def test_svg_draws_every_plan_edge_once_as_the_json_export_lists_it():
    plan = compile_dsl(desk_dsl()).plan
    names = {**plan.node_names, "__finish__": "__finish__"}
    expected = sorted((names[e["source"]], names[e["target"]]) for e in to_json(plan)["edges"])
    drawn = sorted(tuple(title(g).split("->")) for g in groups(svg_of(desk_dsl()), "edge"))
    assert drawn == expected


def test_svg_draws_an_iteration_as_a_cluster_holding_its_body():
    clusters = groups(svg_of(desk_dsl()), "cluster")
    assert [title(c) for c in clusters] == ["cluster_Iteration.Each"]
    assert texts(clusters[0]) == ["Each part ", "(Iteration)"]


def test_svg_nests_a_loop_cluster_inside_its_iteration_cluster():
    svg = svg_of(loop_in_iteration_dsl())
    assert [title(c) for c in groups(svg, "cluster")] == ["cluster_Iteration.I", "cluster_Loop.L"]
    source = to_dot(compile_dsl(loop_in_iteration_dsl()).plan)
    iteration = source.index('subgraph "cluster_Iteration.I"')
    loop = source.index('subgraph "cluster_Loop.L"')
    assert iteration < loop < source.index("}", loop) < source.rindex("}")
    # the loop's body sits in the loop's cluster, which closes before the iteration's
    body = source[loop:source.index("}", loop)]
    assert '"VariableAssigner.Inc"' in body and '"LoopItem.LS"' in body and '"IterationItem.S"' not in body


def test_svg_carries_the_agent_title_when_given():
    assert "Support desk" in texts(svg_of(desk_dsl(), title="Support desk"))


def test_names_with_markup_backslashes_and_line_breaks_are_drawn_literally():
    doc = desk_dsl()
    doc["graph"]["nodes"].append({"id": "Message:Other", "data": {"name": "C:\\new\\table\nsecond line"}})
    drawn = {tooltip(g): texts(g)[0] for g in groups(svg_of(doc), "node") if title(g) != "__finish__"}
    assert drawn["Message:Sorry"] == 'Say "sorry" & <retry>'
    assert drawn["Message:Other"] == "C:\\new\\table second line"


# --- PNG ---------------------------------------------------------------------------------------

def test_png_is_a_valid_image_of_the_laid_out_graph():
    require_graphviz()
    for doc in (desk_dsl(), loop_in_iteration_dsl()):
        plan = compile_dsl(doc).plan
        image = Image.open(io.BytesIO(render(plan, "png")))
        image.load()            # decodes every pixel: a truncated or corrupt file raises here
        svg = ET.fromstring(render(plan, "svg"))
        # the same layout: the SVG's size in points at Graphviz's 96 dpi
        width, height = (float(svg.get(k).removesuffix("pt")) * 96 / 72 for k in ("width", "height"))
        assert image.format == "PNG" and image.mode in ("RGB", "RGBA")
        assert abs(image.size[0] - width) <= 2 and abs(image.size[1] - height) <= 2
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20)) > 10    # drawn, not a blank canvas


# --- failures ----------------------------------------------------------------------------------

def test_without_graphviz_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(DrawingError, match="apt-get install graphviz"):
        render(compile_dsl(desk_dsl()).plan, "svg")


def test_a_layout_that_takes_too_long_is_stopped(monkeypatch):
    require_graphviz()
    monkeypatch.setenv("CANVAS2GRAPH_DRAW_TIMEOUT", "0.000001")
    with pytest.raises(DrawingError, match="CANVAS2GRAPH_DRAW_TIMEOUT"):
        render(compile_dsl(desk_dsl()).plan, "png")


# --- the export command ------------------------------------------------------------------------

def export(tmp_path: Path, doc: dict, *args: str, name: str = "desk.json") -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CANVAS2GRAPH_DEBUG"}
    return subprocess.run([sys.executable, "-m", "canvas2graph.cli", "export", str(path), *args], cwd=REPO,
                          capture_output=True, env=env, timeout=120)


def test_export_prints_the_svg_named_after_the_file(tmp_path):
    require_graphviz()
    result = export(tmp_path, desk_dsl(), "--format", "svg")
    assert result.returncode == 0, result.stderr
    svg = ET.fromstring(result.stdout)
    assert {tooltip(g) for g in groups(svg, "node") if title(g) != "__finish__"} == set(TYPES)
    assert {t for g in groups(svg, "edge") for t in texts(g)} == BRANCHES
    assert "desk" in texts(svg) and groups(svg, "cluster")


def test_export_writes_a_png_file_named_after_the_agent_title(tmp_path):
    require_graphviz()
    out = tmp_path / "desk.png"
    result = export(tmp_path, {"title": "Desk router", "dsl": desk_dsl()}, "--format", "png", "--out", str(out))
    assert result.returncode == 0 and result.stdout == b"", result.stderr
    image = Image.open(out)
    image.load()
    assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100
    dot = export(tmp_path, {"title": "Desk router", "dsl": desk_dsl()}, "--format", "dot")
    assert b'label=<<B>Desk router</B>>' in dot.stdout


def test_export_without_graphviz_says_what_to_install(tmp_path):
    env = {**os.environ, "PATH": "/nonexistent"}
    path = tmp_path / "desk.json"
    path.write_text(json.dumps(desk_dsl()), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "export", str(path), "--format", "svg"],
                            cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "apt-get install graphviz" in result.stderr and "Traceback" not in result.stderr

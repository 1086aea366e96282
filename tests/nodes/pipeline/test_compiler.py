"""Compiler (rag/flow/compiler): templates given inline or by a file, entities and relations from a scripted model."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import xxhash

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.nodes.pipeline.compiler import TEMPLATES_ENV, template_prompts
from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
from tests.conftest import REPO
from tests.nodes.pipeline.helpers import node, run

SHIPPED_COMPILER = REPO / "tests" / "runtime" / "run" / "ingest" / "ragflow_pipelines" / "compiler.json"

# a template as RAGFlow's compilation-template editor saves it (the `entity`/`relation` type shape)
PEOPLE = {"id": "tpl-people", "name": "People", "kind": "knowledge_graph", "config": {
    "kind": "knowledge_graph",
    "guideline": {"target": "Extract the people of a support team and who they work with.",
                  "rules_for_entities": ["Use full names.", "Skip pronouns."],
                  "rules_for_relations": {"en": "Only relations the text states."}},
    "global_rules": "Stay faithful to the text.",
    "entity": {"description": "People named in the text.",
               "fields": [{"type": "person", "description": "A named person", "rule": "Full name"}]},
    "relation": {"fields": [{"type": "works_with", "description": "Two people work together"}]}}}
TERMS = {"id": "tpl-terms", "name": "Terms", "config": {
    "kind": "set", "output": {"entities": {"fields": [
        {"name": "term", "type": "str", "description": "A product term"},
        {"name": "aliases", "type": "list", "description": "Other names", "required": False}]}}}}


def script_ctx(tmp_path, replies: list):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"by_component": {"Compiler:K": replies}}))
    return RunEnvironment(RunSettings(llm_script=str(script))).context("t")


def chunks_upstream(*texts: str) -> dict:
    return {"name": "team.md", "output_format": "chunks", "chunks": [{"text": t} for t in texts]}


def test_the_prompts_are_ragflows_built_from_the_templates_guideline_rules_and_item_types():
    entity_prompt, relation_prompt = template_prompts(PEOPLE["config"])
    assert entity_prompt.split("\n\n") == [
        "# Role and Task:\nExtract the people of a support team and who they work with.",
        "## Global Rules:\nStay faithful to the text.",
        "## Entity Extraction Rules:\n1. Use full names.\n2. Skip pronouns.",
        "## Entity Description:\nPeople named in the text.",
        "## Entity Fields:\n- type: person\n  description: A named person\n  rule: Full name",
        '## Response Format:\nReply with a single JSON object of the form: {"items": [{ "type": "<one of: person>", '
        '"name": "<exact extracted item text>", "description": "<evidence, definition, or detail from the source>", '
        '"source_chunk_ids": ["<source chunk id>", ...] }, ...]}.\nAuto-type: "hypergraph". '
        "Return JSON only, no commentary."]
    assert "## Relation Extraction Rules:\nOnly relations the text states." in relation_prompt
    assert "## Known Entities:\n{known_nodes}" in relation_prompt and '"<one of: works_with>"' in relation_prompt
    # the older field shape: named fields with types, a set's items unique, and no relation prompt
    terms_prompt, none = template_prompts(TERMS["config"])
    assert "- term (str, required): A product term\n- aliases (list, optional): Other names" in terms_prompt
    assert '{"items": [{ "term": <string>, "aliases": [<string>, ...] }, ...]}' in terms_prompt
    assert 'Auto-type: "set". Items must be unique.' in terms_prompt and none == ""


def test_inline_templates_give_ragflows_chunk_ids_and_entity_and_relation_rows(tmp_path):
    compiler = node("Compiler", {"llm_id": "m@OpenAI", "compilation_templates": [PEOPLE]}, cid="Compiler:K")
    doc_id = "doc-1"
    ids = [xxhash.xxh64(f"{t}\x00{doc_id}\x00{i}".encode()).hexdigest()
           for i, t in enumerate(["Ada Lovelace answers refunds.", "Ada works with Grace Hopper on billing."])]
    entities = {"items": [
        {"type": "person", "name": "Ada Lovelace", "description": "Answers refunds", "source_chunk_ids": [ids[0]]},
        {"type": "person", "name": "Grace Hopper", "description": "Billing", "source_chunk_ids": ["t99"]},
        {"type": "person", "name": "ada lovelace", "description": "Works on billing with Grace",
         "source_chunk_ids": [ids[1]]}]}
    relations = {"items": [{"type": "works_with", "source": "Ada Lovelace", "target": "Grace Hopper",
                            "description": "billing", "source_chunk_ids": [ids[1]]}]}
    ctx = script_ctx(tmp_path, ["```json\n" + json.dumps(entities) + "\n```", json.dumps(relations)])
    out, progress = run(compiler, chunks_upstream("Ada Lovelace answers refunds.",
                                                  "Ada works with Grace Hopper on billing."),
                        file={"name": "team.md", "doc_id": doc_id}, ctx=ctx)
    # the chunks go on with RAGFlow's ids (xxh64 of text, doc id and position) and the doc id
    assert out["output_format"] == "chunks"
    assert [(c["id"], c["doc_id"]) for c in out["chunks"]] == [(ids[0], doc_id), (ids[1], doc_id)]
    rows = out["structure"]
    assert [(r["knowledge_graph_kwd"], r.get("name_kwd"), r["source_chunk_ids"]) for r in rows] == [
        ("entity", "ada lovelace", ids),                    # the same name twice: one row, both chunks
        ("entity", "grace hopper", ids),                    # an id outside the batch: the whole batch
        ("relation", None, [ids[1]])]
    ada = json.loads(rows[0]["content_with_weight"])
    assert ada["description"] == "Works on billing with Grace"      # the longer description is kept
    relation = rows[2]
    assert (relation["from_entity_kwd"], relation["to_entity_kwd"]) == ("Ada Lovelace", "Grace Hopper")
    for r in rows:
        assert r["compile_kwd"] == "hypergraph" and r["compilation_template_kind_kwd"] == "knowledge_graph"
        assert r["compilation_template_ids"] == ["tpl-people"] and r["scope_kwd"] == "doc"
        assert r["doc_id"] == doc_id and r["docnm_kwd"] == "team.md" and r["content_ltks"]
    assert any("inserted=3, updated=0, duplicates_dropped=1" in m for _, m in progress)


def test_the_relation_prompt_lists_the_entities_the_model_found(monkeypatch):
    import canvas2graph.nodes.pipeline.compiler as module
    asked = []

    async def complete(llm_id, cid, messages, ctx, gen_conf):          # what the model is sent, and its replies
        asked.append((messages, gen_conf))
        return json.dumps({"items": [{"name": "Ada"}, {"name": "Grace"}] if len(asked) == 1 else []})
    monkeypatch.setattr(module, "complete", complete)
    compiler = node("Compiler", {"llm_id": "m@OpenAI", "compilation_templates": [PEOPLE]}, cid="Compiler:K")
    out, _ = run(compiler, chunks_upstream("Ada and Grace."), file={"name": "a.md", "doc_id": "d"})
    assert [json.loads(r["content_with_weight"])["name"] for r in out["structure"]] == ["Ada", "Grace"]
    (entity_msgs, conf), (relation_msgs, _) = asked
    assert conf == {"temperature": 0.1}
    assert "## Known Entities:\n- Ada\n- Grace\n\n## Response Format:" in relation_msgs[0]["content"]
    chunk_id = out["chunks"][0]["id"]
    assert entity_msgs[1]["content"] == relation_msgs[1]["content"] == (
        "## Source Text:\nEach source chunk is enclosed by [CHUNK_ID: ...] and [END_CHUNK]. For every entity and "
        "relation, return source_chunk_ids containing only the IDs of chunks that support that item.\n"
        f"[CHUNK_ID: {chunk_id}]\nAda and Grace.\n[END_CHUNK]\n\n## Output (JSON only):")


def test_a_templates_file_resolves_the_groups_the_dsl_names(tmp_path, monkeypatch):
    templates = tmp_path / "templates.json"
    templates.write_text(json.dumps({"groups": {"g-terms": ["tpl-terms"], "g-wiki": ["tpl-wiki"]},
                                     "templates": [TERMS, {"id": "tpl-wiki", "config": {"kind": "wiki"}}]}))
    monkeypatch.setenv(TEMPLATES_ENV, str(templates))
    compiler = node("Compiler", {"llm_id": "m@OpenAI", "compilation_template_group_ids": ["g-terms", "g-wiki"]},
                    cid="Compiler:K")
    assert [tid for tid, _ in compiler.templates] == ["tpl-terms"]      # wiki templates are RAGFlow's to skip too
    ctx = script_ctx(tmp_path, [json.dumps({"items": [{"term": "refund", "aliases": ["chargeback"]}]})])
    out, _ = run(compiler, {"name": "a.md", "output_format": "markdown", "markdown": "# Refunds\nA refund..."},
                 file={"name": "a.md", "doc_id": "d"}, ctx=ctx)
    assert [c["text"] for c in out["chunks"]] == ["# Refunds\nA refund..."]    # markdown: one chunk, as RAGFlow's
    [row] = out["structure"]
    assert row["compile_kwd"] == "set" and json.loads(row["content_with_weight"]) == {
        "term": "refund", "aliases": ["chargeback"]}
    assert "name_kwd" not in row and row["knowledge_graph_kwd"] == "entity"


def test_a_group_missing_from_the_file_or_a_bad_file_is_a_diagnostic_naming_it(tmp_path, monkeypatch):
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Compiler:K"]},
        "Compiler:K": {"obj": {"component_name": "Compiler", "params": {"compilation_template_group_id": "g-42",
                                                                        "llm_id": "m@OpenAI"}}, "downstream": []}}}
    templates = tmp_path / "templates.json"
    templates.write_text(json.dumps({"groups": {"g-1": ["tpl-terms"]}, "templates": [TERMS]}))
    monkeypatch.setenv(TEMPLATES_ENV, str(templates))
    _, diags = diagnose(doc)
    assert [(d.code, d.component_id) for d in diags] == [("unsupported", "Compiler:K")]
    assert "template group g-42" in diags[0].message
    templates.write_text(json.dumps({"groups": {"g-42": ["nope"]}, "templates": [TERMS]}))
    _, diags = diagnose(doc)
    assert [(d.code, d.field) for d in diags] == [("invalid-param", "params.compilation_template_group_id")]
    assert "groups.g-42 names template 'nope'" in diags[0].message and str(templates) in diags[0].message
    templates.write_text("{not json")
    _, diags = diagnose(doc)
    assert "not JSON" in diags[0].message


def test_tree_rechunk_and_synthesis_templates_are_warned_as_not_run(monkeypatch):
    tree = {"id": "tpl-tree", "config": {"kind": "tree", "raptor": {"max_token": 256}}}
    rechunk = {"id": "tpl-re", "config": {**PEOPLE["config"], "rechunk": True,
                                         "synthesis": {"enabled": True, "example": "x"}}}
    compiler = node("Compiler", {"llm_id": "m@OpenAI", "compilation_templates": [tree, rechunk]})
    assert [m.split(",")[0] for _, m, _ in compiler.warnings()] == [
        "template tpl-tree is a tree (RAPTOR) template", "template tpl-re asks to rechunk",
        "template tpl-re has synthesis (wiki pages)"]


def test_the_shipped_compiler_pipeline_ingests_with_a_templates_file_into_the_store(tmp_path):
    dsl = json.loads(SHIPPED_COMPILER.read_text())
    dsl["components"]["Compiler:CurvySunsLove"]["obj"]["params"]["compilation_template_group_id"] = "g-people"
    pipeline = tmp_path / "compiler.json"
    pipeline.write_text(json.dumps(dsl))
    templates = tmp_path / "templates.json"
    templates.write_text(json.dumps({"groups": {"g-people": ["tpl-people"]}, "templates": {"tpl-people": PEOPLE}}))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "team.md").write_text("# Team\n\nAda Lovelace answers refunds with Grace Hopper.\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"by_component": {"Compiler:CurvySunsLove": [
        json.dumps({"items": [{"type": "person", "name": "Ada Lovelace"}, {"type": "person", "name": "Grace Hopper"}]}),
        json.dumps({"items": [{"type": "works_with", "source": "Ada Lovelace", "target": "Grace Hopper"}]})]}}))
    env = {k: v for k, v in os.environ.items() if k != TEMPLATES_ENV}
    done = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "ingest", str(pipeline), str(docs), "--kb", "k",
                           "--db", str(tmp_path / "s.db"), "--llm-script", str(script), "--default-llm",
                           "gpt-4o@OpenAI", "--compiler-templates", str(templates)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "1 file(s) ingested (1 chunks)" in done.stdout              # the rows are not counted as chunks
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    fields = [json.loads(f) for (f,) in store.db.execute("SELECT fields FROM chunks").fetchall()]
    store.close()
    chunk = next(f for f in fields if "knowledge_graph_kwd" not in f)
    rows = [f for f in fields if "knowledge_graph_kwd" in f]
    assert [(r["knowledge_graph_kwd"], r.get("name_kwd") or r.get("from_entity_kwd")) for r in rows] == [
        ("entity", "ada lovelace"), ("entity", "grace hopper"), ("relation", "Ada Lovelace")]
    assert all(r["source_chunk_ids"] == [chunk["id"]] and r["doc_id"] == chunk["doc_id"] for r in rows)
    assert all(r["kb_id"] == "k" and r["compile_kwd"] == "hypergraph" for r in rows)


@pytest.mark.parametrize("upstream", [{"output_format": "chunks", "chunks": []},
                                      {"output_format": "markdown", "markdown": "  "}])
def test_nothing_to_compile_asks_no_model(upstream):
    compiler = node("Compiler", {"llm_id": "m@OpenAI", "compilation_templates": [PEOPLE]})
    out, _ = run(compiler, upstream, file={"name": "a.md", "doc_id": "d"})
    assert out == {"output_format": "chunks", "chunks": [], "structure": []}

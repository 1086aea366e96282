"""Loading a DSL: the accepted document shapes, the model built from them and RAGFlow's legacy renames."""
from __future__ import annotations

import json

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.compiler.dsl.load import LEGACY_RENAMES, fill_default_llm, load_dsl, migrate, unwrap
from canvas2graph.compiler.dsl.model import DEFAULT_GLOBALS
from tests.conftest import cpn, dsl

BARE = dsl(**{"Message:A": cpn("Message", {"content": ["hi {sys.query}"]})})


def component_ids(source) -> list[str]:
    return list(load_dsl(source).components)


# --- accepted shapes ---------------------------------------------------------------------------

def test_a_bare_dsl_dict_is_accepted():
    assert component_ids(BARE) == ["begin", "Message:A"]


def test_a_bare_dsl_as_json_text_is_accepted():
    assert component_ids(json.dumps(BARE)) == ["begin", "Message:A"]


def test_utf8_bytes_with_a_byte_order_mark_are_accepted():
    assert component_ids("\ufeff".encode() + json.dumps(BARE).encode()) == ["begin", "Message:A"]


def test_a_ragflow_template_is_unwrapped_from_its_dsl_key():
    template = {"id": 7, "title": {"en": "Demo"}, "description": {"en": "d"}, "canvas_type": "Agent", "dsl": BARE}
    assert component_ids(template) == ["begin", "Message:A"]


def test_an_exported_agent_record_is_unwrapped():
    record = {"id": "abc", "title": "My agent", "user_id": "u", "canvas_category": "agent_canvas", "dsl": BARE}
    assert component_ids(record) == ["begin", "Message:A"]


def test_the_agent_title_comes_from_the_record_template_or_envelope_around_the_dsl():
    assert load_dsl(BARE).title == ""
    assert load_dsl({"title": "My  agent\n", "dsl": BARE}).title == "My agent"
    assert load_dsl({"title": {"zh": "演示", "en": "Demo"}, "dsl": BARE}).title == "Demo"
    assert load_dsl({"title": {"zh": "演示"}, "dsl": BARE}).title == "演示"
    assert load_dsl({"code": 0, "data": {"title": "t", "dsl": json.dumps(BARE)}}).title == "t"
    assert load_dsl({"title": 3, "dsl": BARE}).title == ""


def test_a_dsl_stored_as_a_json_string_is_parsed():
    assert component_ids({"title": "t", "dsl": json.dumps(BARE)}) == ["begin", "Message:A"]


def test_an_api_reply_envelope_is_unwrapped():
    envelope = {"code": 0, "message": "success", "data": {"id": "abc", "title": "t", "dsl": BARE}}
    assert component_ids(envelope) == ["begin", "Message:A"]


def test_an_api_envelope_whose_data_is_the_dsl_itself_is_unwrapped():
    assert component_ids({"code": 0, "data": BARE}) == ["begin", "Message:A"]


def test_a_data_key_without_an_api_code_is_not_taken_for_an_envelope():
    _, diags = diagnose({"data": BARE})
    assert [d.code for d in diags] == ["no-components"]


def test_unwrapping_stops_after_a_few_levels():
    doc = BARE
    for _ in range(5):
        doc = {"dsl": doc}
    _, diags = diagnose(doc)
    assert [d.code for d in diags] == ["no-components"]


def test_a_bare_dsl_is_returned_by_unwrap_unchanged():
    assert unwrap(BARE) is BARE


def test_a_template_compiles_like_its_bare_dsl():
    template = {"id": 1, "title": {"en": "x"}, "dsl": BARE}
    assert diagnose(template)[1] == diagnose(BARE)[1] == []


# --- the model ---------------------------------------------------------------------------------

def test_entries_carry_name_params_downstream_and_parent():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, ["Message:B"], parent_id="Iteration:I"),
                 "Message:B": cpn("Message", {"content": ["y"]})})
    entry = load_dsl(doc).components["Message:A"]
    assert (entry.component_name, entry.params, entry.downstream, entry.parent_id) == (
        "Message", {"content": ["x"]}, ["Message:B"], "Iteration:I")


def test_missing_or_null_params_and_downstream_mean_empty():
    doc = dsl(**{"Message:A": {"obj": {"component_name": "Message", "params": None}, "downstream": None}})
    entry = load_dsl(doc).components["Message:A"]
    assert (entry.params, entry.downstream, entry.parent_id) == ({}, [], None)


def test_duplicate_downstream_ids_are_kept_once_in_order():
    # customer_feedback_dispatcher.json lists the same target twice
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, ["Message:C", "Message:B", "Message:C"])})
    assert load_dsl(doc).components["Message:A"].downstream == ["Message:C", "Message:B"]


def test_upstream_is_ignored():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, upstream=["Nowhere:1"])})
    assert diagnose(doc)[1] == []


def test_display_names_come_from_the_graph_nodes():
    doc = dict(BARE, graph={"nodes": [{"id": "Message:A", "data": {"label": "Message", "name": "Reply"}},
                                      {"id": "Note:X", "data": {"label": "Note", "name": "a note"}},
                                      "garbage", {"id": 3, "data": {"name": "bad id"}}],
                            "edges": []})
    model = load_dsl(doc)
    assert model.components["Message:A"].display_name == "Reply"
    assert model.components["begin"].display_name == ""


def test_graph_note_and_tool_nodes_do_not_become_components():
    doc = dict(BARE, graph={"nodes": [{"id": "Note:X", "data": {"label": "Note", "name": "n"}}], "edges": []})
    assert component_ids(doc) == ["begin", "Message:A"]


def test_initial_globals_start_from_ragflow_defaults_then_the_dsl_globals():
    doc = dict(BARE, globals={"sys.query": "hello", "env.lang": "en"})
    values = load_dsl(doc).initial_globals()
    assert values["sys.query"] == "hello" and values["env.lang"] == "en"
    assert set(DEFAULT_GLOBALS) <= set(values)


def test_variables_declare_env_defaults_under_env_names():
    doc = dict(BARE, variables={"city": {"name": "city", "type": "string", "value": "Paris"},
                                "env.country": {"value": "FR"}})
    values = load_dsl(doc).initial_globals()
    assert (values["env.city"], values["env.country"]) == ("Paris", "FR")


def test_a_global_value_wins_over_the_variable_default():
    doc = dict(BARE, globals={"env.city": "Rome"}, variables={"city": {"value": "Paris"}})
    assert load_dsl(doc).initial_globals()["env.city"] == "Rome"


def test_legacy_list_shaped_variables_mean_no_declarations():
    assert load_dsl(dict(BARE, variables=[])).variables == {}


def test_legacy_keys_and_saved_session_state_are_ignored():
    doc = dict(BARE, history=[["user", "hi"]], path=["begin"], retrieval={"chunks": []}, messages=[],
               reference=[], answer=[], memory=[], task_id="t")
    assert diagnose(doc)[1] == []


def test_the_raw_dsl_is_kept_for_the_digest():
    assert load_dsl({"dsl": BARE}).raw == BARE


# --- legacy renames (agent/dsl_migration.py) ----------------------------------------------------

def legacy_dsl(old: str) -> dict:
    doc = dsl(**{f"{old}:Abc": cpn(old, {"x": 1}, ["Message:A"]),
                 "Message:A": cpn("Message", {"content": [f"{{{old}:Abc@chunks}} and {{ {old}:Abc@x }}"]})})
    doc["graph"] = {"nodes": [{"id": f"{old}:Abc", "data": {"label": old, "name": "Step"}}],
                    "edges": [{"source": "begin", "target": f"{old}:Abc"}]}
    return doc


@pytest.mark.parametrize("old,new", sorted(LEGACY_RENAMES.items()))
def test_legacy_component_names_are_renamed(old, new):
    assert load_dsl(legacy_dsl(old)).components[f"{new}:Abc"].component_name == new


@pytest.mark.parametrize("old,new", sorted(LEGACY_RENAMES.items()))
def test_legacy_id_prefixes_are_renamed_in_ids_downstream_and_references(old, new):
    model = load_dsl(legacy_dsl(old))
    assert list(model.components) == ["begin", f"{new}:Abc", "Message:A"]
    assert model.components["begin"].downstream == [f"{new}:Abc"]
    assert model.components["Message:A"].params["content"] == [f"{{{new}:Abc@chunks}} and {{ {new}:Abc@x }}"]


@pytest.mark.parametrize("old,new", sorted(LEGACY_RENAMES.items()))
def test_legacy_names_are_renamed_in_the_graph_too(old, new):
    graph = load_dsl(legacy_dsl(old)).raw["graph"]
    assert graph["nodes"][0]["id"] == f"{new}:Abc" and graph["nodes"][0]["data"]["label"] == new
    assert graph["edges"][0]["target"] == f"{new}:Abc"


def test_a_renamed_component_is_diagnosed_under_its_new_name():
    _, diags = diagnose(legacy_dsl("Splitter"))
    assert [(d.code, d.component_id) for d in diags] == [("unsupported", "TokenChunker:Abc")]
    assert "'TokenChunker'" in diags[0].message


def test_a_component_named_splitter_with_another_id_is_renamed_by_name():
    doc = dsl(**{"Chunk:1": cpn("Splitter")})
    assert load_dsl(doc).components["Chunk:1"].component_name == "TokenChunker"


def test_ids_that_only_end_with_a_legacy_name_are_left_alone():
    doc = dsl(**{"MySplitter:1": cpn("Message", {"content": ["x"]})})
    assert component_ids(doc) == ["begin", "MySplitter:1"]


def test_migrate_returns_a_dsl_without_legacy_names_untouched():
    assert migrate(BARE) is BARE


# --- a default model for components without one ------------------------------------------------

def test_a_default_model_fills_every_empty_llm_id_sub_agents_included():
    sub_agent = {"component_name": "Agent", "name": "helper", "params": {"llm_id": "", "tools": []}}
    source = dsl(**{
        "Agent:A": cpn("Agent", {"llm_id": "", "tools": [sub_agent, {"component_name": "Wikipedia", "params": {}}]}),
        "LLM:Set": cpn("LLM", {"llm_id": "qwen2.5:7b@Ollama"}),
        "Categorize:C": cpn("Categorize", {"llm_id": "  "}),
        "LLM:Missing": cpn("LLM", {}),
        "Message:M": cpn("Message", {"content": ["x"]}),
    })
    filled = fill_default_llm(source, "gpt-4o-mini@OpenAI")
    comps = filled["components"]
    assert comps["Agent:A"]["obj"]["params"]["llm_id"] == "gpt-4o-mini@OpenAI"
    assert comps["Agent:A"]["obj"]["params"]["tools"][0]["params"]["llm_id"] == "gpt-4o-mini@OpenAI"
    assert "llm_id" not in comps["Agent:A"]["obj"]["params"]["tools"][1]["params"]      # a tool, not a model user
    assert comps["LLM:Set"]["obj"]["params"]["llm_id"] == "qwen2.5:7b@Ollama"          # a chosen model stays
    assert comps["Categorize:C"]["obj"]["params"]["llm_id"] == "gpt-4o-mini@OpenAI"
    assert comps["LLM:Missing"]["obj"]["params"]["llm_id"] == "gpt-4o-mini@OpenAI"
    assert comps["Message:M"]["obj"]["params"] == {"content": ["x"]}
    assert source["components"]["Agent:A"]["obj"]["params"]["llm_id"] == ""          # the input is not changed


def test_load_applies_the_default_model_and_the_error_says_how_to_give_one():
    source = dsl(**{"LLM:A": cpn("LLM", {"llm_id": "", "prompts": [{"role": "user", "content": "{sys.query}"}]})})
    compiled, diags = diagnose(source)
    assert compiled is None
    assert any(d.component_id == "LLM:A" and d.field == "params.llm_id" and "--default-llm" in d.message for d in diags)
    compiled, _ = diagnose(source, default_llm="gpt-4o@OpenAI")
    assert compiled.plan.nodes["LLM:A"].params.llm_id == "gpt-4o@OpenAI"

"""Every diagnostic the compiler emits names the component, the field and the reason.

One test per diagnostic (and per distinct way to trigger it). Each asserts the stable `code`, the
`component_id`, the `field` and that the message explains the problem in the user's terms.
"""
from __future__ import annotations

import json

import pytest

from canvas2graph.types import CompileError, Diagnostic

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from tests.conftest import cpn, dsl


def diagnostics(source) -> list[Diagnostic]:
    return diagnose(source)[1]


def only(source, code: str) -> Diagnostic:
    """The single diagnostic with `code` (and the DSL must not compile if it is an error)."""
    compiled, diags = diagnose(source)
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, f"expected one {code!r}, got {[str(d) for d in diags]}"
    if found[0].severity == "error":
        assert compiled is None
    return found[0]


def codes(source) -> set[str]:
    return {d.code for d in diagnostics(source)}


MSG = cpn("Message", {"content": ["done"]})


def llm(**params) -> dict:
    return cpn("LLM", {"llm_id": "gpt-4o@OpenAI", **params}, ["Message:Out"])


# --- a valid DSL has no diagnostics -----------------------------------------------------------

def test_a_minimal_valid_dsl_compiles_without_diagnostics():
    compiled, diags = diagnose(dsl(**{"Message:A": MSG}))
    assert diags == []
    assert compiled is not None and compiled.component_ids == ["begin", "Message:A"]


def test_diagnostic_str_names_severity_component_field_message_and_code():
    d = Diagnostic("invalid-param", "llm_id is empty", "LLM:A", "params.llm_id")
    assert str(d) == "error: LLM:A / params.llm_id: llm_id is empty [invalid-param]"


def test_diagnostic_to_dict_leaves_out_unset_keys():
    d = Diagnostic("invalid-json", "invalid JSON: x", line=3, column=7)
    assert d.to_dict() == {"code": "invalid-json", "message": "invalid JSON: x", "severity": "error", "line": 3, "column": 7}


def test_compile_dsl_raises_compile_error_carrying_every_diagnostic():
    doc = dsl(**{"Message:A": cpn("Message", {"content": []}, ["Nowhere:1"])})
    with pytest.raises(CompileError) as info:
        compile_dsl(doc)
    assert {d.code for d in info.value.errors} == {"invalid-param", "dangling-downstream"}
    assert "(and 1 more)" in str(info.value)


# --- document level (load) ---------------------------------------------------------------------

def test_invalid_json_reports_line_and_column():
    d = only('{\n  "components": {\n    "begin": {,\n  }\n}', "invalid-json")
    assert (d.line, d.column) == (3, 15)
    assert d.message.startswith("invalid JSON: ") and "property name" in d.message
    assert d.component_id is None


def test_empty_text_is_invalid_json_at_line_1_column_1():
    d = only("", "invalid-json")
    assert (d.line, d.column) == (1, 1)


def test_bytes_that_are_not_utf8_are_reported_as_invalid_encoding():
    d = only(b'{"components": "\xff\xfe"}', "invalid-encoding")
    assert "not UTF-8" in d.message and "byte 16" in d.message


def test_a_json_array_is_not_a_dsl():
    d = only("[1, 2]", "not-an-object")
    assert "list" in d.message


def test_a_dsl_string_that_holds_no_object_is_reported_on_field_dsl():
    d = only({"title": "t", "dsl": "[1]"}, "not-an-object")
    assert d.field == "dsl"


def test_a_document_without_components_is_reported():
    d = only({"title": "x"}, "no-components")
    assert d.field == "components" and "'components'" in d.message


def test_a_graph_only_dsl_says_to_save_it_in_ragflow():
    d = only({"graph": {"nodes": [], "edges": []}}, "graph-only")
    assert d.field == "components" and "editor" in d.message


def test_components_must_be_an_object():
    d = only({"components": [cpn("Begin")]}, "bad-components")
    assert d.field == "components" and "list" in d.message


def test_globals_must_be_an_object():
    doc = dsl(**{"Message:A": MSG})
    doc["globals"] = ["sys.query"]
    d = only(doc, "bad-globals")
    assert d.field == "globals"


def test_variables_must_be_an_object():
    doc = dsl(**{"Message:A": MSG})
    doc["variables"] = "env.x"
    d = only(doc, "bad-variables")
    assert d.field == "variables"


def test_a_component_that_is_not_an_object_is_reported_on_its_id():
    d = only(dsl(**{"Message:A": "Message"}), "bad-component")
    assert d.component_id == "Message:A" and "str" in d.message


def test_a_component_without_obj_is_reported_on_field_obj():
    d = only(dsl(**{"Message:A": {"downstream": []}}), "bad-component")
    assert (d.component_id, d.field) == ("Message:A", "obj")


@pytest.mark.parametrize("name", ["", None, 7])
def test_component_name_must_be_a_non_empty_string(name):
    d = only(dsl(**{"Message:A": {"obj": {"component_name": name, "params": {}}}}), "bad-component")
    assert (d.component_id, d.field) == ("Message:A", "obj.component_name")


def test_params_must_be_an_object():
    d = only(dsl(**{"Message:A": {"obj": {"component_name": "Message", "params": ["hi"]}}}), "bad-params")
    assert (d.component_id, d.field) == ("Message:A", "obj.params") and "list" in d.message


@pytest.mark.parametrize("downstream", ["Message:B", [1], [["Message:B"]], {"Message:B": 1}])
def test_downstream_must_be_a_list_of_ids(downstream):
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, downstream)}), "bad-downstream")
    assert (d.component_id, d.field) == ("Message:A", "downstream")


def test_parent_id_must_be_a_string():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, parent_id=["Loop:L"])}), "bad-parent")
    assert (d.component_id, d.field) == ("Message:A", "parent_id")


def test_component_ids_must_be_non_empty_strings():
    d = only(dsl(**{"": MSG}), "bad-component-id")
    assert "non-empty strings" in d.message


def test_non_string_component_ids_in_a_python_dict_are_reported():
    doc = dsl(**{"Message:A": MSG})
    doc["components"][3] = MSG
    d = only(doc, "bad-component-id")
    assert d.component_id == "3"


def test_documents_nested_deeper_than_the_limit_are_refused():
    value: list = []
    for _ in range(300):
        value = [value]
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["x"], "extra": value})}), "too-deep")
    assert "200 levels" in d.message
    assert (d.component_id, d.field) == ("Message:A", "params.extra.0")
    assert "component 'Message:A', field 'params.extra.0'" in d.message


def test_a_too_deep_value_is_named_inside_a_template_and_outside_the_components():
    value: list = []
    for _ in range(300):
        value = [value]
    wrapped = {"title": "t", "dsl": dsl(**{"Message:A": cpn("Message", {"content": [value]})})}
    d = only(wrapped, "too-deep")
    assert (d.component_id, d.field) == ("Message:A", "params.content.0")
    d = only({"components": {}, "notes": {"k": value}}, "too-deep")
    assert (d.component_id, d.field) == (None, "notes.k.0")


def test_load_errors_in_several_components_are_all_reported():
    doc = dsl(**{"Message:A": "x", "Message:B": {"obj": {"component_name": "Message", "params": 3}}})
    assert [(d.code, d.component_id) for d in diagnostics(doc)] == [
        ("bad-component", "Message:A"), ("bad-params", "Message:B")]


# --- component names ----------------------------------------------------------------------------

def test_an_unknown_component_name_is_reported_on_obj_component_name():
    d = only(dsl(**{"Frobnicate:A": cpn("Frobnicate")}), "unknown-component")
    assert (d.component_id, d.field) == ("Frobnicate:A", "obj.component_name")
    assert "'Frobnicate'" in d.message


@pytest.mark.parametrize("name", ["Bing", "RewriteQuestion", "WaitingDialogue"])
def test_frontend_operators_without_an_engine_class_are_reported(name):
    d = only(dsl(**{f"{name}:A": cpn(name)}), "no-engine-class")
    assert (d.component_id, d.field) == (f"{name}:A", "obj.component_name")
    assert f"'{name}'" in d.message and "cannot run" in d.message


@pytest.mark.parametrize("name", ["File", "Parser", "TokenChunker", "TitleChunker", "Tokenizer", "Extractor"])
def test_only_ingestion_pipeline_components_are_unsupported_and_they_say_so(name):
    d = only(dsl(**{f"{name}:A": cpn(name)}), "unsupported")
    assert (d.component_id, d.field) == (f"{name}:A", "obj.component_name")
    assert f"'{name}'" in d.message and "ingestion pipeline" in d.message and "agent canvases only" in d.message


def test_every_ragflow_agent_component_is_supported():
    from canvas2graph.nodes.registry import KNOWN_ELSEWHERE, lookup
    agent_components = ["Begin", "Message", "LLM", "Agent", "Categorize", "Switch", "Iteration", "IterationItem", "Loop",
                        "LoopItem", "ExitLoop", "UserFillUp", "VariableAssigner", "VariableAggregator",
                        "StringTransform", "ListOperations", "DataOperations", "Invoke", "DocGenerator",
                        "ExcelProcessor", "Browser", "Retrieval", "TavilySearch", "TavilyExtract", "Google",
                        "GoogleScholar", "DuckDuckGo", "Wikipedia", "SearXNG", "Crawler", "ArXiv", "PubMed", "GitHub",
                        "YahooFinance", "DeepL", "QWeather", "CodeExec", "ExeSQL", "Email", "AkShare", "WenCai",
                        "TuShare", "Jin10", "KeenableSearch", "QueritSearch", "QueritContents", "BGPT"]
    assert [n for n in agent_components if lookup(n) is None] == []
    assert not KNOWN_ELSEWHERE & set(agent_components)


def test_an_agent_tool_without_an_engine_class_is_reported_on_its_tool_entry():
    tools = [{"component_name": "TavilySearch", "name": "TavilySearch", "params": {}},
             {"component_name": "WaitingDialogue", "name": "Wait", "params": {}}]
    d = only(dsl(**{"Agent:A": cpn("Agent", {"llm_id": "m", "tools": tools})}), "no-engine-class")
    assert (d.component_id, d.field) == ("Agent:A", "params.tools.1.component_name")
    assert "'WaitingDialogue'" in d.message


def test_a_bing_tool_which_ragflow_removed_names_the_substitutes_once():
    tools = [{"component_name": "Bing", "name": "Bing", "params": {}}]
    d = only(dsl(**{"Agent:A": cpn("Agent", {"llm_id": "m", "tools": tools})}), "removed-tool")
    assert (d.component_id, d.field) == ("Agent:A", "params.tools.0.component_name")
    assert "removed in RAGFlow 0.20" in d.message and "DuckDuckGo" in d.message


def test_a_sub_agent_tool_is_checked_too():
    sub = {"component_name": "Agent", "name": "Helper", "params": {"tools": [{"component_name": "Bing"}]}}
    d = only(dsl(**{"Agent:A": cpn("Agent", {"llm_id": "m", "tools": [sub]})}), "removed-tool")
    assert d.field == "params.tools.0.params.tools.0.component_name"


def test_an_unknown_agent_tool_is_reported():
    d = only(dsl(**{"Agent:A": cpn("Agent", {"tools": [{"component_name": "Teleport"}]})}), "unknown-component")
    assert (d.component_id, d.field) == ("Agent:A", "params.tools.0.component_name")
    assert "'Teleport'" in d.message


# --- params that fail the component's checks ---------------------------------------------------

def param_error(component_name: str, params: dict, cid: str | None = None) -> Diagnostic:
    cid = cid or f"{component_name}:A"
    return only(dsl(**{cid: cpn(component_name, params, ["Message:Out"]), "Message:Out": MSG}), "invalid-param")


@pytest.mark.parametrize("params", [{"llm_id": ""}, {"llm_id": "   "}, {}])
def test_an_empty_or_missing_llm_id_is_an_error_on_params_llm_id(params):
    d = param_error("LLM", params)
    assert (d.component_id, d.field) == ("LLM:A", "params.llm_id")
    assert "llm_id is empty" in d.message


@pytest.mark.parametrize("name", ["temperature", "top_p", "presence_penalty", "frequency_penalty"])
def test_llm_sampling_values_must_lie_between_0_and_1(name):
    d = param_error("LLM", {"llm_id": "m", name: 1.5})
    assert d.field == f"params.{name}" and "less than or equal to 1" in d.message


def test_llm_max_tokens_must_not_be_negative():
    d = param_error("LLM", {"llm_id": "m", "max_tokens": -1})
    assert d.field == "params.max_tokens" and "greater than or equal to 0" in d.message


def test_llm_prompts_must_not_be_empty():
    d = param_error("LLM", {"llm_id": "m", "prompts": []})
    assert d.field == "params.prompts" and "must not be empty" in d.message


def test_a_wrongly_typed_param_names_the_field():
    d = param_error("LLM", {"llm_id": "m", "temperature": "hot"})
    assert d.field == "params.temperature" and "number" in d.message


def test_max_retries_from_the_common_params_must_not_be_negative():
    d = param_error("LLM", {"llm_id": "m", "max_retries": -2})
    assert d.field == "params.max_retries"


@pytest.mark.parametrize("params", [{}, {"content": []}, {"content": ""}])
def test_a_message_needs_content(params):
    d = only(dsl(**{"Message:A": cpn("Message", params)}), "invalid-param")
    assert (d.component_id, d.field) == ("Message:A", "params.content")
    assert "at least one" in d.message


def test_message_stream_must_be_a_boolean():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["x"], "stream": "sometimes"})}), "invalid-param")
    assert d.field == "params.stream" and "boolean" in d.message


def test_a_message_content_of_the_wrong_shape_is_an_error_not_a_crash():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": 5})}), "invalid-param")
    assert d.component_id == "Message:A" and d.field.startswith("params")


def test_begin_mode_must_be_conversational_task_or_webhook():
    doc = dsl(**{"Message:A": MSG})
    doc["components"]["begin"]["obj"]["params"] = {"mode": "batch"}
    d = only(doc, "invalid-param")
    assert (d.component_id, d.field) == ("begin", "params.mode") and "'batch'" in d.message


def categorize(**params) -> dict:
    base = {"llm_id": "m", "query": "sys.query",
            "category_description": {"yes": {"to": ["Message:Out"]}, "no": {"to": ["Message:Out"]}}}
    return {**base, **params}


def test_categorize_needs_categories():
    d = param_error("Categorize", categorize(category_description={}))
    assert d.field == "params.category_description" and "at least one category" in d.message


def test_every_category_needs_a_target():
    d = param_error("Categorize", categorize(category_description={"yes": {"to": []}, "no": {"to": ["Message:Out"]}}))
    assert d.field == "params.category_description" and "'yes'" in d.message and "no target" in d.message


def test_categorize_query_must_be_a_reference():
    d = param_error("Categorize", categorize(query="what is this?"))
    assert d.field == "params.query" and "not a variable reference" in d.message


def test_categorize_requires_llm_id_where_ragflow_check_does_not():
    """A check that passes means a run that can start (docs/compatibility.md): RAGFlow's run fails on it."""
    d = param_error("Categorize", categorize(llm_id=""))
    assert d.component_id == "Categorize:A" and d.field == "params.llm_id" and "llm_id is empty" in d.message


def test_a_category_target_that_is_not_a_string_is_an_error_not_a_crash():
    d = param_error("Categorize", categorize(category_description={"yes": {"to": [["Message:Out"]]}}))
    assert d.component_id == "Categorize:A" and d.field == "params"


def switch(**params) -> dict:
    base = {"conditions": [{"logical_operator": "and", "to": ["Message:Out"],
                            "items": [{"cpn_id": "sys.query", "operator": "contains", "value": "x"}]}],
            "end_cpn_ids": ["Message:Out"]}
    return {**base, **params}


def test_switch_needs_conditions():
    d = param_error("Switch", switch(conditions=[]))
    assert d.field == "params.conditions" and "at least one condition" in d.message


def test_switch_needs_an_else_target():
    d = param_error("Switch", switch(end_cpn_ids=[]))
    assert d.field == "params.end_cpn_ids" and "end_cpn_ids" in d.message


def test_every_switch_condition_needs_a_target():
    d = param_error("Switch", switch(conditions=[{"items": [], "to": []}]))
    assert d.field == "params.conditions.0.to" and "needs a target" in d.message


def test_a_switch_operator_must_be_known():
    cond = {"to": ["Message:Out"], "items": [{"cpn_id": "sys.query", "operator": "like", "value": "x"}]}
    d = param_error("Switch", switch(conditions=[cond]))
    assert d.field == "params.conditions.0.items.0.operator" and "'like'" in d.message


def test_a_switch_item_variable_must_be_a_reference():
    cond = {"to": ["Message:Out"], "items": [{"cpn_id": "hello world", "operator": "=", "value": "x"}]}
    d = param_error("Switch", switch(conditions=[cond]))
    assert d.field == "params.conditions.0.items.0.cpn_id"


# --- graph checks ------------------------------------------------------------------------------

def test_a_dsl_without_begin_is_reported():
    d = only({"components": {"Message:A": MSG}}, "no-begin")
    assert d.component_id == "begin" and "no 'begin'" in d.message


def test_the_begin_id_must_hold_a_begin_component():
    d = only({"components": {"begin": MSG}}, "no-begin")
    assert (d.component_id, d.field) == ("begin", "obj.component_name") and "not Message" in d.message


def test_a_dangling_downstream_id_is_reported_on_the_source():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, ["Message:Gone"])}), "dangling-downstream")
    assert (d.component_id, d.field) == ("Message:A", "downstream") and "'Message:Gone'" in d.message


def test_a_dangling_parent_id_is_reported():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["x"]}, parent_id="Iteration:Gone")}), "dangling-parent")
    assert (d.component_id, d.field) == ("Message:A", "parent_id") and "'Iteration:Gone'" in d.message


def test_a_switch_case_leading_to_a_missing_component_names_the_case_field():
    params = switch()
    params["conditions"].append({"to": ["Message:Gone"], "items": []})
    d = only(dsl(**{"Switch:A": cpn("Switch", params), "Message:Out": MSG}), "dangling-route")
    assert (d.component_id, d.field) == ("Switch:A", "params.conditions.1.to")
    assert "Case 2" in d.message and "'Message:Gone'" in d.message


def test_a_switch_else_leading_to_a_missing_component_names_end_cpn_ids():
    d = only(dsl(**{"Switch:A": cpn("Switch", switch(end_cpn_ids=["Message:Gone"])), "Message:Out": MSG}), "dangling-route")
    assert (d.component_id, d.field) == ("Switch:A", "params.end_cpn_ids")


def test_a_category_leading_to_a_missing_component_names_its_to_field():
    cats = {"yes": {"to": ["Message:Out"]}, "no": {"to": ["Message:Gone"]}}
    d = only(dsl(**{"Categorize:A": cpn("Categorize", categorize(category_description=cats)), "Message:Out": MSG}),
             "dangling-route")
    assert (d.component_id, d.field) == ("Categorize:A", "params.category_description.no.to")
    assert "'Message:Gone'" in d.message


def test_a_reference_to_a_missing_component_is_reported_on_the_field_that_holds_it():
    d = only(dsl(**{"LLM:A": llm(sys_prompt="Use {Retrieval:Gone@formalized_content}"), "Message:Out": MSG}),
             "dangling-reference")
    assert (d.component_id, d.field) == ("LLM:A", "params.sys_prompt")
    assert "'Retrieval:Gone'" in d.message


def test_a_reference_in_a_prompt_names_the_prompt_index():
    prompts = [{"role": "user", "content": "{sys.query}"}, {"role": "user", "content": "and {LLM:Gone@content}"}]
    d = only(dsl(**{"LLM:A": llm(prompts=prompts), "Message:Out": MSG}), "dangling-reference")
    assert d.field == "params.prompts.1.content"


def test_a_reference_in_message_content_names_the_alternative():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["ok", "{Agent:Gone@content}"]})}), "dangling-reference")
    assert (d.component_id, d.field) == ("Message:A", "params.content.1")


def test_a_categorize_query_to_a_missing_component_is_reported():
    d = only(dsl(**{"Categorize:A": cpn("Categorize", categorize(query="begin2@x")), "Message:Out": MSG}),
             "dangling-reference")
    assert (d.component_id, d.field) == ("Categorize:A", "params.query")


def test_a_switch_item_to_a_missing_component_is_reported():
    cond = {"to": ["Message:Out"], "items": [{"cpn_id": "LLM:Gone@content", "operator": "empty"}]}
    d = only(dsl(**{"Switch:A": cpn("Switch", switch(conditions=[cond])), "Message:Out": MSG}), "dangling-reference")
    assert d.component_id == "Switch:A" and d.field.startswith("params.conditions.0")


def test_an_undefined_system_variable_is_reported():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["{sys.querry}"]})}), "unknown-variable")
    assert (d.component_id, d.field) == ("Message:A", "params.content.0")
    assert "system variable 'sys.querry'" in d.message


def test_an_undeclared_conversation_variable_is_reported():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["{env.city}"]})}), "unknown-variable")
    assert "conversation variable 'env.city'" in d.message


def test_conversation_variables_declared_in_variables_or_globals_are_known():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["{env.city} {env.country}"]})})
    doc["variables"] = {"city": {"name": "city", "type": "string", "value": "Paris"}}
    doc["globals"] = {"env.country": "FR"}
    assert diagnostics(doc) == []


def test_all_default_system_variables_are_known():
    names = ["query", "user_id", "conversation_turns", "files", "history", "date"]
    content = " ".join(f"{{sys.{n}}}" for n in names)
    assert diagnostics(dsl(**{"Message:A": cpn("Message", {"content": [content]})})) == []


def test_a_reference_to_an_output_a_component_never_sets_is_a_warning():
    doc = dsl(**{"LLM:A": llm(), "Message:Out": cpn("Message", {"content": ["{LLM:A@answer}"]})})
    compiled, diags = diagnose(doc)
    [d] = diags
    assert compiled is not None
    assert (d.code, d.severity, d.component_id, d.field) == ("unknown-output", "warning", "Message:Out", "params.content.0")
    assert "no output 'answer'" in d.message and "content" in d.message


def test_begin_outputs_are_its_form_fields():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["{begin@topic} {begin@nope}"]})})
    doc["components"]["begin"]["obj"]["params"] = {"inputs": {"topic": {"name": "Topic", "type": "line"}}}
    d = only(doc, "unknown-output")
    assert "'nope'" in d.message and "topic" in d.message


def test_outputs_declared_in_params_outputs_are_known():
    doc = dsl(**{"LLM:A": llm(outputs={"summary": {"type": "string"}}),
                 "Message:Out": cpn("Message", {"content": ["{LLM:A@summary}"]})})
    assert diagnostics(doc) == []


def test_an_unreachable_component_is_a_warning_and_still_compiles():
    compiled, diags = diagnose(dsl(**{"Message:A": MSG, "Message:Orphan": MSG}))
    [d] = diags
    assert compiled is not None
    assert (d.code, d.severity, d.component_id) == ("unreachable", "warning", "Message:Orphan")
    assert "no path from 'begin'" in d.message


def test_branch_targets_are_reachable_through_the_branch_not_downstream():
    doc = dsl(**{"Switch:A": cpn("Switch", switch(end_cpn_ids=["Message:Else"])), "Message:Out": MSG, "Message:Else": MSG})
    assert diagnostics(doc) == []


def test_successors_of_an_unsupported_component_are_not_reported_unreachable():
    doc = dsl(**{"Parser:A": cpn("Parser", {}, ["Message:Out"]), "Message:Out": MSG})
    assert [(d.code, d.component_id) for d in diagnostics(doc)] == [("unsupported", "Parser:A")]


def test_a_downstream_cycle_is_an_error_naming_its_members():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["a"]}, ["Message:B"]),
                 "Message:B": cpn("Message", {"content": ["b"]}, ["Message:A"])})
    d = only(doc, "cycle")
    assert d.field == "downstream" and d.component_id == "Message:A"
    assert "Message:A -> Message:B -> Message:A" in d.message and "outside any Iteration or Loop" in d.message


def test_a_self_loop_is_a_cycle():
    d = only(dsl(**{"Message:A": cpn("Message", {"content": ["a"]}, ["Message:A"])}), "cycle")
    assert "Message:A -> Message:A" in d.message


def test_a_cycle_through_an_unsupported_component_is_still_found():
    doc = dsl(**{"Parser:A": cpn("Parser", {}, ["Message:B"]), "Message:B": cpn("Message", {"content": ["b"]}, ["Parser:A"])})
    assert codes(doc) == {"unsupported", "cycle"}


def test_a_back_edge_inside_one_container_is_not_a_cycle_error():
    # old DSLs draw an explicit back-edge to the IterationItem (SPEC 2.3); the container repeats
    doc = dsl(**{"Iteration:I": cpn("Iteration", {}),
                 "IterationItem:S": cpn("IterationItem", {}, ["Message:B"], parent_id="Iteration:I"),
                 "Message:B": cpn("Message", {"content": ["b"]}, ["IterationItem:S"], parent_id="Iteration:I")})
    assert "cycle" not in codes(doc)


def test_a_switch_that_routes_back_to_an_earlier_component_is_a_cycle():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["a"]}, ["Switch:S"]),
                 "Switch:S": cpn("Switch", switch(conditions=[{"to": ["Message:A"], "items": []}],
                                                  end_cpn_ids=["Message:Out"])),
                 "Message:Out": MSG})
    assert only(doc, "cycle").message.count("Message:A") == 2


def test_independent_problems_are_all_reported_in_one_pass():
    doc = dsl(**{"LLM:A": cpn("LLM", {"llm_id": ""}, ["Message:Gone"]),
                 "Bing:B": cpn("Bing"),
                 "Message:C": cpn("Message", {"content": ["{sys.nope}"]})})
    assert codes(doc) == {"invalid-param", "dangling-downstream", "no-engine-class", "unknown-variable", "unreachable"}


def test_diagnostics_survive_a_json_round_trip():
    _, diags = diagnose("{oops")
    assert json.loads(json.dumps([d.to_dict() for d in diags]))[0]["code"] == "invalid-json"

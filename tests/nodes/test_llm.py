"""LLM: prompts, history, sampling flags, streaming decision and structured output (SPEC 3.3)."""
from __future__ import annotations

import pytest

from canvas2graph.nodes.llm import parse_json_answer
from canvas2graph.runtime.graph.values import PENDING
from tests.nodes.helpers import context, errors, state

MESSAGE = {"Message:M": {"component_name": "Message", "params": {"content": ["{LLM:A@content}"]}}}


def llm(params: dict | None = None, downstream: list | None = None, **more):
    params = {"llm_id": "m@OpenAI", **(params or {})}
    from tests.nodes.helpers import canvas
    from canvas2graph.compiler.canvas import diagnose
    comps = {"LLM:A": {"component_name": "LLM", "params": params, "downstream": downstream or []}, **more}
    compiled, diags = diagnose(canvas(**comps))
    assert compiled is not None, [str(d) for d in diags]
    return compiled.plan.nodes["LLM:A"]


def test_the_prompt_is_history_then_prompts_with_the_system_prompt_first():
    node = llm({"sys_prompt": "Be {begin@tone}.", "prompts": [{"role": "user", "content": "Q: {sys.query}"}]})
    st = state("now?", begin={"tone": "brief"})
    st["history"] = [["user", "before?"], ["assistant", {"content": "earlier answer", "_elapsed_time": 1}], ["user", "now?"]]
    assert node.build_messages(st) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "before?"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "Q: now?"},
    ]


def test_a_first_prompt_with_the_same_role_as_the_last_history_message_replaces_it():
    node = llm({"prompts": [{"role": "assistant", "content": "draft"}, {"role": "user", "content": "go"}]})
    st = state("go")
    st["history"] = [["user", "a"], ["assistant", "b"], ["user", "go"]]
    assert [m["content"] for m in node.build_messages(st)] == ["a", "draft", "go"]


def test_the_history_window_counts_pairs_of_turns():
    node = llm({"message_history_window_size": 1})
    st = state("q3")
    st["history"] = [["user", "q1"], ["assistant", "a1"], ["user", "q2"], ["assistant", "a2"], ["user", "q3"]]
    assert [m["content"] for m in node.build_messages(st)] == ["a2", "q3"]


def test_sampling_values_are_sent_only_when_enabled():
    node = llm({"temperature": 0.3, "top_p": 0.9, "temperatureEnabled": True, "max_tokens": 100, "max_tokensEnabled": False})
    assert node.params.gen_conf() == {"temperature": 0.3}


def test_sampling_switches_are_read_under_the_names_ragflow_saves_them():
    """RAGFlow's canvas saves `topPEnabled`, `maxTokensEnabled`, `presencePenaltyEnabled`, `frequencyPenaltyEnabled`
    (camel case), and its engine reads those: `top_pEnabled` and the like switch nothing on."""
    node = llm({"temperature": 0.1, "top_p": 0.3, "presence_penalty": 0.4, "frequency_penalty": 0.7, "max_tokens": 256,
                "temperatureEnabled": True, "topPEnabled": True, "presencePenaltyEnabled": True,
                "frequencyPenaltyEnabled": True, "maxTokensEnabled": True})
    assert node.params.gen_conf() == {"temperature": 0.1, "top_p": 0.3, "presence_penalty": 0.4,
                                      "frequency_penalty": 0.7, "max_tokens": 256}
    assert llm({"top_p": 0.3, "top_pEnabled": True, "max_tokens": 9, "max_tokensEnabled": True}).params.gen_conf() == {}


def test_prompt_values_that_are_not_strings_print_as_json():
    node = llm({"prompts": [{"role": "user", "content": "{begin@x}"}]})
    assert node.build_messages(state(**{"begin": {"x": [1, 2]}}))[-1]["content"] == "[1, 2]"


def test_orchestration_blocks_are_removed_from_the_system_prompt():
    node = llm({"sys_prompt": "Keep.<REFLECTION>drop me</REFLECTION>"})
    assert node.build_messages(state("q"))[0]["content"] == "Keep."


def test_it_streams_only_into_a_direct_message_without_goto_or_schema():
    assert llm(downstream=["Message:M"], **MESSAGE).streams
    assert not llm().streams
    assert not llm({"exception_method": "goto", "exception_goto": ["Message:M"]}, downstream=["Message:M"], **MESSAGE).streams
    schema = {"structured": {"type": "object", "properties": {"a": {"type": "string"}}}}
    assert not llm({"outputs": schema}, downstream=["Message:M"], **MESSAGE).streams


async def test_streaming_leaves_a_pending_generation_for_the_message():
    result = await llm(downstream=["Message:M"], **MESSAGE).run(state("hi"), context())
    pending = result.outputs["content"]
    assert pending[PENDING] and pending["component_id"] == "LLM:A"
    assert pending["messages"][-1] == {"role": "user", "content": "hi"}


async def test_a_blocking_call_returns_the_answer_without_reasoning():
    result = await llm().run(state("hi"), context({"content": "Yes.", "reasoning": "hmm"}))
    assert result.outputs == {"content": "Yes."}
    assert result.inputs == {"sys.query": "hi"}


async def test_structured_output_is_parsed_and_retried():
    schema = {"structured": {"type": "object", "properties": {"city": {"type": "string"}}}}
    node = llm({"outputs": schema, "max_retries": 1})
    result = await node.run(state("hi"), context("not json at all", '```json\n{"city": "Paris"}\n```'))
    assert result.outputs == {"structured": {"city": "Paris"}}


@pytest.mark.parametrize("text, value", [
    ('{"a": 1}', {"a": 1}),
    ('<think>x</think>```json\n{"a": 1,}\n```', {"a": 1}),
    ("nothing", None),
])
def test_parse_json_answer(text, value):
    assert parse_json_answer(text) == value


def test_thoughts_show_the_last_prompt():
    text = llm({"prompts": [{"role": "user", "content": "Q: {sys.query}"}]}).thoughts(state("why?"))
    assert text == "⌛Give me a moment—starting from: \n\nQ: why?\n\nI’ll figure out our best next move."


@pytest.mark.parametrize("params, field", [
    ({"llm_id": ""}, "params.llm_id"),
    ({"llm_id": "m@OpenAI", "temperature": 1.5}, "params.temperature"),
    ({"llm_id": "m@OpenAI", "top_p": -0.1}, "params.top_p"),
    ({"llm_id": "m@OpenAI", "max_tokens": -1}, "params.max_tokens"),
    ({"llm_id": "m@OpenAI", "prompts": []}, "params.prompts"),
])
def test_check_rules(params, field):
    assert field in [d.field for d in errors("LLM", params)]

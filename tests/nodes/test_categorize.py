"""Categorize: substring counts pick the category, the last one is the fallback (SPEC 3.6)."""
from __future__ import annotations

import pytest

from canvas2graph.nodes.categorize import pick_category
from tests.nodes.helpers import build, context, errors, state

CATEGORIES = {
    "weather": {"description": "Weather.", "examples": ["Rain?"], "to": ["Message:W"]},
    "billing": {"description": "Money.", "to": ["Message:B"]},
    "other": {"description": "Else.", "to": ["Message:O"]},
}


def categorize(**params):
    targets = {t: {"component_name": "Message", "params": {"content": ["x"]}} for t in ["Message:W", "Message:B", "Message:O"]}
    return build("Categorize:C", "Categorize", {"llm_id": "m@OpenAI", "category_description": CATEGORIES, **params}, **targets)


@pytest.mark.parametrize("answer, expected", [
    ("billing", "billing"),
    ("It is about BILLING, not weather. Billing!", "billing"),   # the most occurrences win
    ("weather or billing", "weather"),                            # ties go to the first category
    ("no idea", "other"),                                         # nothing matches: the LAST category
])
def test_pick_category(answer, expected):
    assert pick_category(answer, list(CATEGORIES)) == expected


async def test_the_answer_routes_to_the_category_targets():
    node = categorize()
    result = await node.run(state("Why was I charged?"), context("billing."))
    assert result.outputs == {"category_name": "billing", "_next": ["Message:B"]}
    assert result.inputs == {"sys.query": "Why was I charged?"}


async def test_query_can_name_any_variable():
    node = categorize(query="begin@review")
    result = await node.run(state("", begin={"review": "sunny?"}), context("weather"))
    assert result.inputs == {"begin@review": "sunny?"}


def test_thoughts_list_the_categories():
    assert categorize().thoughts({}) == "Which should it falls into `weather`,`billing`,`other`? ..."


def test_routes_cover_every_category():
    assert [label for label, _ in categorize().routes()] == ["weather", "billing", "other"]


@pytest.mark.parametrize("params, text", [
    ({"category_description": {}}, "at least one category"),
    ({"category_description": {"a": {"to": []}}}, "has no target"),
    ({"category_description": {" ": {"to": ["begin"]}}}, "empty name"),
])
def test_check_rules(params, text):
    found = errors("Categorize", params)
    assert any(text in d.message and d.field == "params.category_description" for d in found), found


def test_an_empty_llm_id_is_an_error_of_the_check_unless_a_default_model_fills_it():
    """RAGFlow's check() lets it through and the run fails; here the check names it (docs/compatibility.md)."""
    from tests.nodes.helpers import canvas
    from canvas2graph.compiler.canvas import diagnose
    dsl = canvas(**{"Categorize:C": {"component_name": "Categorize", "params": {"category_description": {"a": {"to": ["Message:M"]}}}},
                    "Message:M": {"component_name": "Message", "params": {"content": ["x"]}}})
    compiled, diags = diagnose(dsl)
    assert compiled is None
    assert [(d.component_id, d.field, d.severity) for d in diags] == [("Categorize:C", "params.llm_id", "error")]
    assert "llm_id is empty" in diags[0].message
    compiled, diags = diagnose(dsl, default_llm="gpt-4o@OpenAI")
    assert compiled is not None, diags

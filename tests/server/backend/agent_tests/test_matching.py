"""A case's comparisons: exact, substring, regular expression and JSON subset, each failing with a
line that says what differs."""
from __future__ import annotations

import pytest

from canvas2graph.server.backend.agent_tests.matching import MatchError, match


def test_a_plain_value_is_compared_exactly():
    assert match("Refunded.", "Refunded.", "answer") == []
    assert match("Refunded.", "Refused.", "answer") == ['answer expected "Refunded.", got "Refused."']


def test_texts_of_several_lines_differ_as_a_unified_diff():
    [problem] = match("Desk: billing\nRefunded.", "Desk: technical\nRefunded.", "answer")
    assert "-Desk: billing" in problem and "+Desk: technical" in problem and " Refunded." in problem


def test_a_path_differs_as_two_paths():
    [problem] = match(["begin", "LLM:A", "Message:M"], ["begin", "LLM:B", "Message:M"], "path")
    assert problem == "path: expected begin > LLM:A > Message:M\n    got      begin > LLM:B > Message:M"


def test_structures_differ_at_the_place_named():
    expected = [{"role": "system", "content": "Two sentences."}, {"role": "user", "content": "Hi"}]
    actual = [{"role": "system", "content": "One sentence."}, {"role": "user", "content": "Hi"}]
    assert match(expected, actual, "LLM:A prompt") == [
        'LLM:A prompt[0].content expected "Two sentences.", got "One sentence."']


def test_contains_finds_a_substring_or_components_in_order():
    assert match({"contains": "refund"}, "It is refunded.", "answer") == []
    assert match({"contains": "refund"}, "No.", "answer") == ['answer: expected to contain "refund", got "No."']
    assert match({"contains": ["begin", "Message:M"]}, ["begin", "LLM:A", "Message:M"], "path") == []
    assert match({"contains": ["Message:M", "begin"]}, ["begin", "LLM:A", "Message:M"], "path") != []


def test_regex_searches_the_text_and_a_path_joined():
    assert match({"regex": r"refunded within \d+ days"}, "It is refunded within 5 days.", "answer") == []
    assert match({"regex": r"LLM:(A|B) > Message"}, ["begin", "LLM:B", "Message:M"], "path") == []
    assert match({"regex": "^No"}, "Yes", "answer") == ['answer: expected to match /^No/, got "Yes"']
    with pytest.raises(MatchError, match="does not compile"):
        match({"regex": "("}, "x", "answer")


def test_json_subset_checks_the_keys_given_and_lists_item_by_item():
    actual = {"category_name": "billing", "_next": ["LLM:A"], "score": {"a": 1, "b": 2}}
    assert match({"json": {"category_name": "billing", "score": {"a": 1}}}, actual, "out") == []
    assert match({"json": {"score": {"a": 2}}}, actual, "out") == ["out: score.a: expected 2, got 1"]
    assert match({"json": {"missing": 1}}, actual, "out") == ["out: missing: missing"]
    assert match({"json": [1, 2]}, [1, 2, 3], "out") == ["out: the value: expected 2 item(s), got 3: [1, 2, 3]"]

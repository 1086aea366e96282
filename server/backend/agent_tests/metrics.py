"""How an evaluation scores a row's answer against its expected one: a number from 0 to 1.

- `exact`: 1 when the answer, trimmed, equals the expected text, trimmed;
- `contains`: 1 when the expected text is a substring of the answer;
- `regex`: 1 when the expected text, a regular expression, matches somewhere in the answer;
- `json`: 1 when the expected JSON is a subset of the answer read as JSON (server/backend/agent_tests/matching.py);
- `judge`: a model reads the question, the expected answer and the answer, and grades with the rubric
  below (docs/testing.md): 1 the same facts, 0.5 partly right, 0 wrong or no answer.
A row without an expected value scores None (reported, not averaged) except under `judge`.
"""
from __future__ import annotations

import json
import re
from typing import Any

from canvas2graph.server.backend.agent_tests.matching import subset_problems

__all__ = ["METRICS", "MetricError", "score", "JUDGE_RUBRIC", "judge_messages", "read_verdict", "ajudge"]

METRICS = ("exact", "contains", "regex", "json", "judge")

JUDGE_RUBRIC = """You grade an assistant's answer to a user's question against a reference answer.

Scores:
- 1: the answer states what the reference states (wording, order and extra helpful detail do not matter).
- 0.5: the answer is partly right: it misses part of the reference, or adds a claim the reference contradicts.
- 0: the answer is wrong, contradicts the reference, refuses, or does not answer the question.

Reply with one JSON object and nothing else: {"score": 0 | 0.5 | 1, "reason": "<one sentence>"}"""


class MetricError(ValueError):
    """A row the metric cannot score (an expected regex that does not compile, expected JSON that is not JSON)."""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _json(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise MetricError(f"{what} is not JSON: {value[:100]!r}")


def score(metric: str, answer: str, expected: Any) -> float | None:
    """The score of a non-judge metric; None when the row expects nothing."""
    if expected is None or expected == "":
        return None
    if metric == "exact":
        return float(answer.strip() == _text(expected).strip())
    if metric == "contains":
        return float(_text(expected) in answer)
    if metric == "regex":
        try:
            return float(re.search(_text(expected), answer, re.S) is not None)
        except re.error as e:
            raise MetricError(f"the expected regex {expected!r} does not compile: {e}")
    if metric == "json":
        want = _json(expected, "the expected value")
        try:
            got = _json(answer, "the answer")
        except MetricError:
            return 0.0
        return float(not subset_problems(want, got))
    raise MetricError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")


def judge_messages(question: str, expected: Any, answer: str) -> list[tuple[str, str]]:
    reference = "(none given: grade whether the answer answers the question)" if expected in (None, "") else _text(expected)
    return [("system", JUDGE_RUBRIC),
            ("user", f"Question:\n{question}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{answer}")]


def read_verdict(text: str) -> tuple[float, str]:
    """The judge's {score, reason}; a reply that is not one raises MetricError saying what it was."""
    from json_repair import repair_json
    found = re.search(r"\{.*\}", text or "", re.S)
    verdict = repair_json(found.group(0), return_objects=True) if found else None
    value = verdict.get("score") if isinstance(verdict, dict) else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricError(f"the judge did not reply with {{\"score\", \"reason\"}}: {text[:200]!r}")
    return min(max(float(value), 0.0), 1.0), str(verdict.get("reason") or "")


async def ajudge(model, question: str, expected: Any, answer: str) -> tuple[float, str, dict]:
    """(score, reason, token usage) from the judge model."""
    from langchain_core.messages import HumanMessage, SystemMessage
    (_, system), (_, user) = judge_messages(question, expected, answer)
    reply = await model.ainvoke([SystemMessage(system), HumanMessage(user)])
    usage = dict(getattr(reply, "usage_metadata", None) or {})
    value, reason = read_verdict(reply.text if hasattr(reply, "text") else str(reply.content))
    return value, reason, usage

"""The prompts canvas2graph adds to what a canvas says: citation rules, the citation pass, the
multi-turn question rewrite and the structured-output instruction (SPEC 3.3, 7).

RAGFlow keeps its own wording in `rag/prompts/*.md`; these are written for canvas2graph and ask
the model for the same things, so answers carry the same `[ID:n]` markers.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

CITATION_RULES = """\
## Citing sources
The context above contains passages, each headed by a line `ID: <n>`.
- When a sentence of your answer relies on a passage, end that sentence with the marker [ID:<n>] of
  that passage, for example: "The engine parses PDF tables [ID:12]."
- Cite at most four passages per sentence, each in its own marker: [ID:3][ID:7].
- Only cite ids that appear in the context; never invent one, and do not cite for general knowledge.
- Do not list the sources separately at the end."""


def citation_rules() -> str:
    return CITATION_RULES


def citation_pass(sources: str) -> list[dict[str, str]]:
    """The system prompt of the second pass that adds markers to an answer written without them."""
    return [{"role": "system", "content": (
        "You add source citations to an answer that is already written.\n"
        "Return the answer exactly as given (same words, same order, same formatting) and insert a marker\n"
        "[ID:<n>] after each statement that one of the sources below supports, using that source's id.\n"
        "Do not add, remove or reword anything else, and do not cite a source that does not support the\n"
        "statement. If no source supports any statement, return the answer unchanged.\n\n"
        "## Sources\n" + sources)}]


def full_question(messages: list[Mapping[str, Any]]) -> list[dict[str, str]]:
    """A request that turns a multi-turn conversation into one self-contained question."""
    lines = []
    for m in messages:
        if m.get("role") in ("user", "assistant"):
            who = "USER" if m["role"] == "user" else "ASSISTANT"
            lines.append(f"{who}: {m.get('content', '')}")
    return [{"role": "user", "content": (
        "Below is a conversation. Rewrite the user's last message as a single question that can be\n"
        "understood without the conversation: resolve pronouns and references to earlier turns, keep the\n"
        "user's language and intent, and add nothing the user did not ask. Reply with the question only.\n\n"
        "## Conversation\n" + "\n".join(lines))}]


def structured_output(schema: Mapping[str, Any]) -> str:
    return ("Reply with a single JSON object that validates against this JSON schema, and nothing else:\n"
            + json.dumps(schema, ensure_ascii=False))


def force_json(schema: Mapping[str, Any]) -> list[dict[str, str]]:
    """The retry prompt after an answer that did not parse as JSON."""
    return [{"role": "system", "content": structured_output(schema)},
            {"role": "user", "content": "Output ONLY valid JSON for the schema above: no prose, no code fences."}]

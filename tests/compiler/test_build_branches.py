"""Parallel branches run at once, where RAGFlow's batches do (compiler/build.py: one superstep per batch).

Models that take time (the scripted model's `delay_ms`) show it by each branch's own start and finish
(`_created_time` and `_elapsed_time` in its node_finished), not by a wall-clock threshold.
"""
from __future__ import annotations

from tests.conftest import cpn
from tests.events import final_content, finished
from tests.nodes.helpers import one_turn as run

BRANCHES = ["LLM:A", "LLM:B", "LLM:C", "LLM:D"]


def fan_out(n: int = 4) -> dict:
    """begin -> n LLMs side by side -> StringTransform:Join (a join: it waits for every branch) -> Message:Out.
    (An LLM right before a Message would leave its model call to the Message, which streams it.)"""
    branches = BRANCHES[:n]
    return {"components": {
        "begin": cpn("Begin", downstream=branches),
        **{cid: cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": f"{cid} {{sys.query}}"}]},
                    ["StringTransform:Join"]) for cid in branches},
        "StringTransform:Join": cpn("StringTransform", {"method": "merge", "delimiters": [","],
                                                        "script": " ".join(f"{{{cid}@content}}" for cid in branches)},
                                    ["Message:Out"]),
        "Message:Out": cpn("Message", {"content": ["{StringTransform:Join@result}"], "stream": False}),
    }}


def span(events: list[dict], cid: str) -> tuple[float, float]:
    done = finished(events, cid)[0]
    return done["created_at"], done["created_at"] + done["elapsed_time"]


async def test_four_branches_of_a_slow_model_overlap_in_time():
    replies = [{"content": f"r{i}", "delay_ms": 500} for i in range(4)]
    events, outcome = await run(fan_out(), "go", replies=replies)
    assert outcome.status == "finished"
    spans = [span(events, cid) for cid in BRANCHES]
    # every branch started before any of them finished: they waited for their models at the same time
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    assert sorted(final_content(events).split()) == ["r0", "r1", "r2", "r3"]


async def test_the_join_starts_after_the_last_branch_finishes():
    replies = [{"content": "quick", "delay_ms": 10}, {"content": "slow", "delay_ms": 300}]
    events, _ = await run(fan_out(2), "go", replies=replies)
    join_start = finished(events, "StringTransform:Join")[0]["created_at"]
    assert all(end <= join_start for _, end in (span(events, cid) for cid in BRANCHES[:2]))

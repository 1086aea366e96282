"""Generated sequences of saves, forgets, status changes and searches (Hypothesis): whatever the texts and the
order, a memory stays under its size, counts exactly what it holds, and a search returns at most `top_n` enabled,
unforgotten messages."""
from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings, strategies as st
from langgraph.store.memory import InMemoryStore

from canvas2graph.runtime.services.memory import MemoryBook

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
STEP = st.one_of(
    st.tuples(st.just("save"), TEXT, TEXT, st.sampled_from(["", "u1", "u2"])),
    st.tuples(st.just("forget"), st.integers(0, 50)),
    st.tuples(st.just("status"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("search"), TEXT, st.integers(1, 10), st.floats(0, 1)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(300, 5000), steps=st.lists(STEP, max_size=40))
def test_a_memory_keeps_its_invariants_whatever_is_done_to_it(size, steps):
    asyncio.run(_play(size, steps))


async def _play(size: int, steps: list) -> None:
    book = MemoryBook(InMemoryStore(), "t")
    memory = await book.create("m", ["raw"])
    await book.update(memory.id, {"memory_size": size})
    saved: list[int] = []
    for step in steps:
        if step[0] == "save":
            _, question, answer, user = step
            saved.append((await book.add_exchange([memory.id], user_input=question, agent_response=answer,
                                                  user_id=user))[memory.id])
            held = await book.messages(memory.id)
            assert await book.usage(memory.id) == sum(m.size for m in held)
            # one message larger than the memory is kept alone: nothing else is left
            assert sum(m.size for m in held) <= size or len(held) == 1
        elif step[0] in ("forget", "status") and saved:
            message_id = saved[step[1] % len(saved)]
            if message_id in {m.message_id for m in await book.messages(memory.id)}:
                if step[0] == "forget":
                    await book.forget(memory.id, message_id)
                else:
                    await book.set_status(memory.id, message_id, step[2])
        elif step[0] == "search":
            _, query, top_n, threshold = step
            found = await book.search([memory.id], query, top_n=top_n, similarity_threshold=threshold)
            assert len(found) <= top_n and all(m.status and not m.forget_at for m in found)

"""LangGraph's `multitask_strategy="rollback"`: a turn stopped by a newer run is undone.

The thread goes back to the state it had before the turn: the checkpoint the turn started from is copied
as the thread's newest (LangGraph's own fork, `update_state(config, None, as_node="__copy__")`), so the next
run starts there; the turn's checkpoints stay in the history, off the thread's branch. Its question and
answer leave the session's message log, and LangGraph's API shows the run no more, as in LangGraph Server
(its row stays, `rolled_back`, while the session does).
"""
from __future__ import annotations

import asyncio

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.events import MESSAGE_ID
from canvas2graph.server.backend.store import Store
from canvas2graph.server.backend.store_turns import TurnRecord


async def roll_back(store: Store, turn: TurnRecord) -> None:
    session = await store.get_session(turn.tenant, turn.session_id)
    if session is None:
        return
    compiled = await asyncio.to_thread(compile_dsl, session.dsl_text or session.dsl)
    graph = compiled.graph(store.checkpointer)
    config = {"configurable": {"thread_id": session.id, "checkpoint_ns": ""}}
    first = None
    async for snapshot in graph.aget_state_history(config, filter={MESSAGE_ID: turn.message_id}):
        first = snapshot                # newest first: the last one seen is the turn's first checkpoint
    if first is not None and first.parent_config is not None:
        await graph.aupdate_state(first.parent_config, None, as_node="__copy__")
    elif first is not None:             # the session's first turn: nothing came before it
        await store.checkpointer.adelete_thread(session.id)
    await store.drop_logged_message(session.id, turn.message_id)

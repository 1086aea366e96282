"""The server's store: tokens, agents, sessions and leases, on a SQLite file and on PostgreSQL."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid

import pytest

from canvas2graph.server.backend.store import A2ATaskRow, StoreError, open_store, process_owner

DSL = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": []}}}


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_tokens_name_their_tenant_and_only_their_hash_is_kept(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        token_id, token = await store.create_token(who)
        assert await store.tenant_of(token) == who
        assert await store.tenant_of(token + "x") is None
        listed = await store.list_tokens(who)
        assert [row["id"] for row in listed] == [token_id] and token not in str(listed)
        assert await store.revoke_token(token_id, tenant="someone-else") is False
        assert await store.revoke_token(token) is True
        assert await store.tenant_of(token) is None
        assert await store.revoke_token(token) is False          # already revoked


async def test_agents_and_sessions_belong_to_one_tenant(durable_url):
    async with open_store(durable_url) as store:
        alice, bob = tenant(), tenant()
        agent = await store.create_agent(alice, "desk", DSL)
        assert await store.get_agent(bob, agent.id) is None
        with pytest.raises(StoreError, match="already exists"):
            await store.create_agent(alice, "desk", DSL)
        session = await store.create_session(alice, source="agent", dsl=DSL, agent_id=agent.id,
                                             messages=[{"role": "assistant", "content": "hi"}])
        assert await store.get_session(bob, session.id) is None
        assert await store.delete_sessions(bob, [session.id]) == []
        assert await store.append_messages(session.id, [{"role": "user", "content": "q"}], {"chunks": {}})
        stored = await store.get_session(alice, session.id, with_messages=True)
        assert [m["content"] for m in stored.messages] == ["hi", "q"] and stored.reference == [{"chunks": {}}]
        assert [s.id for s in await store.list_sessions(alice, agent.id)] == [session.id]
        assert await store.delete_agent(alice, agent.id) is True
        assert await store.get_session(alice, session.id) is None


async def test_a_session_id_cannot_be_created_twice(durable_url):
    async with open_store(durable_url) as store:
        sid = f"s-{uuid.uuid4().hex}"
        await store.create_session(tenant(), source="graph", dsl=DSL, session_id=sid)
        with pytest.raises(StoreError, match="not available"):
            await store.create_session(tenant(), source="graph", dsl=DSL, session_id=sid)


async def test_one_lease_per_session(durable_url):
    async with open_store(durable_url) as store:
        session = await store.create_session(tenant(), source="graph", dsl=DSL)
        first, second = process_owner(), process_owner()
        assert await store.acquire_lease(session.id, first)
        assert not await store.acquire_lease(session.id, second)
        await store.release_lease(session.id, second)             # not the holder: no effect
        assert not await store.acquire_lease(session.id, second)
        await store.release_lease(session.id, first)
        assert await store.acquire_lease(session.id, second)


async def test_an_expired_lease_or_a_dead_holder_on_this_host_is_taken_over(durable_url):
    async with open_store(durable_url) as store:
        session = await store.create_session(tenant(), source="graph", dsl=DSL)
        assert await store.acquire_lease(session.id, "elsewhere:1:abc", seconds=-1)   # already expired
        assert await store.acquire_lease(session.id, process_owner())
        other = await store.create_session(tenant(), source="graph", dsl=DSL)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        assert await store.acquire_lease(other.id, f"{socket.gethostname()}:{dead.pid}:gone")
        assert await store.acquire_lease(other.id, process_owner())


async def test_cancel_requests_reach_the_lease_holder(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        session = await store.create_session(who, source="graph", dsl=DSL)
        assert await store.request_cancel(who, session.id) is False      # nothing runs
        owner = process_owner()
        assert await store.acquire_lease(session.id, owner)
        assert await store.request_cancel(tenant(), session.id) is False  # not that tenant's session
        assert await store.request_cancel(who, session.id) is True
        assert await store.cancel_requests(owner) == [session.id]
        await store.release_lease(session.id, owner)
        assert await store.cancel_requests(owner) == []


async def test_deleting_a_session_deletes_its_checkpoints(durable_url):
    from langgraph.checkpoint.base import empty_checkpoint
    async with open_store(durable_url) as store:
        who = tenant()
        session = await store.create_session(who, source="graph", dsl=DSL)
        config = {"configurable": {"thread_id": session.id, "checkpoint_ns": ""}}
        await store.checkpointer.aput(config, empty_checkpoint(), {}, {})
        assert await store.checkpointer.aget_tuple(config) is not None
        await store.delete_sessions(who, [session.id])
        assert await store.checkpointer.aget_tuple(config) is None


async def test_the_newest_turn_of_each_session_of_a_page_comes_in_one_query(durable_url):
    from canvas2graph.server.backend.store_turns import TurnRecord
    async with open_store(durable_url) as store:
        who = tenant()
        a = await store.create_session(who, source="graph", dsl=DSL)
        b = await store.create_session(who, source="graph", dsl=DSL)
        quiet = await store.create_session(who, source="graph", dsl=DSL)

        def turn(session, n: int, status: str, at: float) -> TurnRecord:
            return TurnRecord(id=f"{session.id}-{n}", session_id=session.id, tenant=who, source="agent", status=status,
                              request={}, message_id=f"m{n}", created_at=at)
        for record in (turn(a, 1, "finished", 1.0), turn(a, 2, "stopped", 2.0), turn(b, 1, "paused", 5.0),
                       turn(b, 2, "finished", 5.0)):          # b's two turns at one instant: the smaller id is newest,
            await store.add_turn(record)                     # as session_turns orders them
        newest = await store.last_turns(who, [a.id, b.id, quiet.id])
        assert {sid: t.status for sid, t in newest.items()} == {a.id: "stopped", b.id: "paused"}
        assert [t.id for t in await store.session_turns(who, b.id, limit=1)] == [newest[b.id].id]
        assert await store.last_turns(tenant(), [a.id]) == {} and await store.last_turns(who, []) == {}


async def test_the_message_log_keeps_each_message_once_in_order_without_rewriting_the_session_row(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        session = await store.create_session(who, source="agent", dsl=DSL,
                                             messages=[{"role": "assistant", "content": "Hi! How can I help?"}])
        row_before = (await store.db.fetchall("SELECT messages, reference FROM c2g_sessions WHERE id = ?",
                                              (session.id,)))[0]
        for turn in range(300):
            assert await store.append_messages(session.id, [{"role": "user", "content": f"q{turn}", "id": f"m{turn}"}])
            assert await store.append_messages(session.id, [{"role": "assistant", "content": f"a{turn}", "id": f"m{turn}"}],
                                               {"chunks": {"turn": turn}})
        # a turn taken over logs again what its first worker logged: kept once, with its reference once
        assert await store.append_messages(session.id, [{"role": "user", "content": "q7", "id": "m7"}])
        assert await store.append_messages(session.id, [{"role": "assistant", "content": "a7", "id": "m7"}], {"again": 1})
        stored = await store.get_session(who, session.id, with_messages=True)
        assert [m["content"] for m in stored.messages] == ["Hi! How can I help?"] + [
            text for turn in range(300) for text in (f"q{turn}", f"a{turn}")]
        assert stored.reference == [{"chunks": {"turn": turn}} for turn in range(300)]
        # the log grows by rows: the session row is as it was created (an append costs the same at any length)
        assert (await store.db.fetchall("SELECT messages, reference FROM c2g_sessions WHERE id = ?",
                                        (session.id,)))[0] == row_before
        assert (await store.get_session(who, session.id)).messages == [
            {"role": "assistant", "content": "Hi! How can I help?"}]
        assert (await store.find_session_of_message(who, None, "m123")).id == session.id
        assert await store.find_session_of_message(tenant(), None, "m123") is None
        await store.drop_logged_message(session.id, "m299")
        assert [m["content"] for m in (await store.get_session(who, session.id, with_messages=True)).messages][-2:] \
            == ["q298", "a298"]
        assert await store.delete_sessions(who, [session.id]) == [session.id]
        assert await store.db.fetchall("SELECT seq FROM c2g_session_messages WHERE session_id = ?", (session.id,)) == []
        assert not await store.append_messages(session.id, [{"role": "user", "content": "late"}])   # deleted


async def test_a_message_log_an_earlier_version_kept_in_the_session_row_is_read_found_and_rolled_back(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        session = await store.create_session(who, source="agent", dsl=DSL)
        old = [{"role": "user", "content": "old q", "id": "old"}, {"role": "assistant", "content": "old a", "id": "old"}]
        await store.db.execute("UPDATE c2g_sessions SET messages = ?, reference = ? WHERE id = ?",
                               (json.dumps(old), json.dumps([{"chunks": {}}]), session.id))
        assert await store.append_messages(session.id, [{"role": "user", "content": "new q", "id": "new"}])
        stored = await store.get_session(who, session.id, with_messages=True)
        assert [m["content"] for m in stored.messages] == ["old q", "old a", "new q"]
        assert stored.reference == [{"chunks": {}}]
        assert (await store.find_session_of_message(who, None, "old")).id == session.id
        await store.drop_logged_message(session.id, "old")
        assert [m["content"] for m in (await store.get_session(who, session.id, with_messages=True)).messages] == ["new q"]


async def test_a_database_that_dies_with_the_process_is_refused():
    with pytest.raises(StoreError, match="outlives"):
        async with open_store(":memory:"):
            pass


# --- versions, tags, webhook calls, rate limits ------------------------------------------------------
async def test_versions_follow_ragflows_save_rules(durable_url):
    from canvas2graph.server.backend.store import MAX_DRAFT_VERSIONS
    async with open_store(durable_url) as store:
        who = tenant()
        agent = await store.create_agent(who, "versioned", DSL)
        ok = {"compiles": True, "diagnostics": []}
        first = await store.save_version(who, agent.id, DSL, title="v", diagnostics=ok, created_by=who)
        again = await store.save_version(who, agent.id, DSL, title="v", diagnostics=ok, created_by=who, released=True)
        assert again.id == first.id and again.released          # the same DSL: the latest is refreshed
        draft = await store.save_version(who, agent.id, DSL, title="v", diagnostics=ok, created_by=who)
        assert draft.id != first.id and not draft.released      # a released version is never changed
        assert (await store.latest_version(who, agent.id, released=True)).id == first.id
        for i in range(MAX_DRAFT_VERSIONS + 3):
            await store.save_version(who, agent.id, {**DSL, "n": i}, title="v", diagnostics=ok, created_by=who)
        listed = await store.list_versions(who, agent.id)
        assert sum(not v.released for v in listed) == MAX_DRAFT_VERSIONS and any(v.released for v in listed)
        assert (await store.latest_version(who, agent.id)).dsl == {**DSL, "n": MAX_DRAFT_VERSIONS + 2}
        assert await store.get_version(tenant(), agent.id, first.id) is None


async def test_tags_are_normalized_counted_and_filter_the_agent_list(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        a = await store.create_agent(who, "a", DSL)
        b = await store.create_agent(who, "b", DSL)
        assert await store.set_tags(who, a.id, ["ML", "ml", " support ", "a,b", "x" * 100]) == \
            "ML,support,a b," + "x" * 64
        assert await store.set_tags(who, b.id, "support, ml_ops") == "support,ml_ops"
        assert await store.set_tags(tenant(), a.id, "stolen") is None
        assert await store.tag_counts(who) == [("support", 2), ("ML", 1), ("a b", 1), ("ml_ops", 1), ("x" * 64, 1)]
        by_tag, total = await store.list_agents(who, tags=["ml"])
        assert [x.id for x in by_tag] == [a.id] and total == 1       # "ml" does not match "ml_ops"
        by_word, _ = await store.list_agents(who, keywords="ML_O")
        assert [x.id for x in by_word] == [b.id]


async def test_webhook_calls_keep_the_newest_and_go_with_their_agent(durable_url):
    import time
    from canvas2graph.server.backend.store import WEBHOOK_CALLS_KEPT, WebhookCall
    async with open_store(durable_url) as store:
        who = tenant()
        agent = await store.create_agent(who, "hooked", DSL)
        calls = [WebhookCall(id=uuid.uuid4().hex, tenant=who, agent_id=agent.id, is_test=True, mode="Streaming",
                             status="running", start_ts=time.time() + i) for i in range(WEBHOOK_CALLS_KEPT + 2)]
        for call in calls:
            await store.add_webhook_call(call)
        await store.add_webhook_events(calls[-1].id, 0, [(time.time(), {"event": "message"})])
        kept = await store.webhook_calls(who, agent.id, limit=1000)
        assert len(kept) == WEBHOOK_CALLS_KEPT and kept[0].id == calls[-1].id
        assert await store.webhook_call(who, agent.id, calls[0].id) is None
        assert [e["event"] for e in await store.webhook_events(calls[-1].id, 0)] == ["message"]
        await store.delete_agent(who, agent.id)
        assert await store.webhook_calls(who, agent.id) == []
        assert await store.webhook_events(calls[-1].id, 0) == []


async def test_a_token_bucket_allows_its_capacity_then_refills(durable_url):
    import asyncio
    async with open_store(durable_url) as store:
        bucket = f"test:{uuid.uuid4().hex}"
        taken = await asyncio.gather(*(store.take_token(bucket, 3, 60) for _ in range(5)))
        assert sorted(taken) == [False, False, True, True, True]
        fast = f"test:{uuid.uuid4().hex}"
        assert await store.take_token(fast, 1, 0.2) and not await store.take_token(fast, 1, 0.2)
        await asyncio.sleep(0.25)
        assert await store.take_token(fast, 1, 0.2)


async def test_an_mcp_session_keeps_its_conversations_and_the_calls_running_on_them(durable_url):
    async with open_store(durable_url) as store:
        mcp_session, who = f"mcp-{uuid.uuid4().hex}", tenant()
        client = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                  "clientInfo": {"name": "test", "version": "1"}}
        await store.create_mcp_session(mcp_session, who, "2025-11-25", client)
        found = await store.get_mcp_session(mcp_session)
        assert (found["tenant"], found["protocol_version"], found["client"]) == (who, "2025-11-25", client)
        assert await store.get_mcp_conversation(mcp_session, "agent-1") is None
        await store.put_mcp_conversation(mcp_session, "agent-1", "s-1", None, call_id="7", call_owner="A")
        assert await store.mcp_call(mcp_session, "7") == {"session_id": "s-1", "call_owner": "A"}
        await store.set_mcp_asking(mcp_session, "agent-1", True)
        assert await store.mcp_askers(mcp_session) == {"A"}
        await store.add_mcp_reply(mcp_session, "A", '{"jsonrpc": "2.0", "id": 1, "result": {}}')
        assert await store.take_mcp_replies(mcp_session, "B") == []
        assert await store.take_mcp_replies(mcp_session, "A") == ['{"jsonrpc": "2.0", "id": 1, "result": {}}']
        assert await store.take_mcp_replies(mcp_session, "A") == []            # taken once
        # the call ends paused: the form is kept, nothing runs, nobody waits for an answer
        pause = {"inputs": {"feedback": {"type": "line"}}, "tips": "Any feedback?"}
        await store.put_mcp_conversation(mcp_session, "agent-1", "s-1", pause)
        assert await store.get_mcp_conversation(mcp_session, "agent-1") == {"session_id": "s-1", "pause": pause}
        assert await store.mcp_call(mcp_session, "7") is None and await store.mcp_askers(mcp_session) == set()
        await store.delete_mcp_session(mcp_session)
        assert await store.get_mcp_session(mcp_session) is None
        assert await store.get_mcp_conversation(mcp_session, "agent-1") is None


async def test_idle_mcp_sessions_expire_with_their_conversations_and_answers(durable_url):
    async with open_store(durable_url) as store:
        idle, busy = f"mcp-{uuid.uuid4().hex}", f"mcp-{uuid.uuid4().hex}"
        for mcp_session in (idle, busy):
            await store.create_mcp_session(mcp_session, tenant(), "2025-11-25", {})
            await store.put_mcp_conversation(mcp_session, "agent-1", "s-1", None)
            await store.add_mcp_reply(mcp_session, "A", "{}")
        # last seen long ago (a time no other test's session has, in a database other runs share)
        await store.db.execute("UPDATE c2g_mcp_sessions SET seen_at = 1000 WHERE id = ?", (idle,))
        assert await store.expire_mcp_sessions(seen_before=2000) == 1
        assert await store.get_mcp_session(idle) is None
        assert await store.get_mcp_conversation(idle, "agent-1") is None
        assert await store.take_mcp_replies(idle, "A") == []
        assert await store.get_mcp_session(busy) is not None
        assert await store.get_mcp_conversation(busy, "agent-1") is not None
        before = (await store.get_mcp_session(busy))["seen_at"]
        await store.touch_mcp_session(busy)
        assert (await store.get_mcp_session(busy))["seen_at"] >= before
        await store.delete_mcp_session(busy)


async def test_a_database_made_by_an_earlier_version_gets_the_new_columns(tmp_path):
    import sqlite3
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE c2g_agents (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, title TEXT NOT NULL, "
                "description TEXT, avatar TEXT, dsl TEXT NOT NULL, create_time BIGINT NOT NULL, "
                "update_time BIGINT NOT NULL)")
    old.execute("INSERT INTO c2g_agents VALUES ('a1', 'old', 'kept', NULL, NULL, '{}', 1, 1)")
    old.commit()
    old.close()
    async with open_store(str(path)) as store:
        agent = await store.get_agent("old", "a1")
        assert agent.title == "kept" and agent.tags == "" and agent.canvas_type is None
        assert await store.set_tags("old", "a1", ["works"]) == "works"


def a2a_row(who: str, agent_id: str = "agent", *, version: int = 1, status_ns: int = 5, state: str = "TASK_STATE_WORKING",
            context_id: str = "ctx", updated_at: float = 1e9, task_id: str | None = None) -> A2ATaskRow:
    return A2ATaskRow(id=task_id or f"task-{uuid.uuid4().hex}", tenant=who, agent_id=agent_id, context_id=context_id,
                      state=state, status_ns=status_ns, version=version, task=b"\x00\xffbytes", updated_at=updated_at)


async def test_a2a_tasks_are_written_by_compare_and_set_and_kept_per_tenant_and_agent(durable_url):
    async with open_store(durable_url) as store:
        alice, bob = tenant(), tenant()
        row = a2a_row(alice)
        assert await store.insert_a2a_task(row) is True
        assert await store.insert_a2a_task(a2a_row(bob, task_id=row.id)) is False       # the id is taken
        assert (await store.a2a_task(alice, "agent", row.id)).task == b"\x00\xffbytes"
        assert await store.a2a_task(bob, "agent", row.id) is None
        assert await store.a2a_task(alice, "another agent", row.id) is None
        second = a2a_row(alice, version=2, state="TASK_STATE_COMPLETED", task_id=row.id)
        assert await store.replace_a2a_task(second, prev_version=1) is True
        assert await store.replace_a2a_task(a2a_row(alice, version=2, task_id=row.id), prev_version=1) is False
        assert await store.replace_a2a_task(a2a_row(bob, version=3, task_id=row.id), prev_version=2) is False
        assert await store.a2a_task_head(row.id) == (2, "TASK_STATE_COMPLETED", "ctx")
        # a write logs the event that made it, and a refused one logs nothing
        assert await store.replace_a2a_task(a2a_row(alice, version=3, task_id=row.id), 2, b"made 3") is True
        assert await store.replace_a2a_task(a2a_row(alice, version=3, task_id=row.id), 2, b"stale") is False
        assert await store.a2a_events(row.id, 0) == [(3, b"made 3")]
        assert await store.delete_a2a_task(bob, "agent", row.id) is False
        assert await store.delete_a2a_task(alice, "agent", row.id) is True
        assert await store.a2a_task_by_id(row.id) is None


async def test_a2a_task_lists_page_newest_status_first_and_filter(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        rows = [a2a_row(who, status_ns=ns, context_id=ctx, state=state) for ns, ctx, state in
                [(30, "a", "TASK_STATE_WORKING"), (20, "b", "TASK_STATE_COMPLETED"), (20, "a", "TASK_STATE_COMPLETED"),
                 (-1, "a", "TASK_STATE_SUBMITTED")]]
        for row in rows:
            await store.insert_a2a_task(row)
        await store.insert_a2a_task(a2a_row(who, "another agent"))
        tied = sorted((r for r in rows if r.status_ns == 20), key=lambda r: r.id, reverse=True)
        expected = [rows[0].id, *(r.id for r in tied), rows[3].id]
        page, total = await store.list_a2a_tasks(who, "agent", limit=2)
        assert [r.id for r in page] == expected[:2] and total == 4
        rest, _ = await store.list_a2a_tasks(who, "agent", after=(page[-1].status_ns, page[-1].id), limit=10)
        assert [r.id for r in rest] == expected[2:]
        found, total = await store.list_a2a_tasks(who, "agent", context_id="a", state="TASK_STATE_COMPLETED")
        assert [r.id for r in found] == [rows[2].id] and total == 1
        recent, _ = await store.list_a2a_tasks(who, "agent", since_ns=20)
        assert {r.id for r in recent} == {r.id for r in rows[:3]}


async def test_a2a_events_follow_their_versions_and_old_tasks_and_events_expire(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        old, new = a2a_row(who, updated_at=1000.0), a2a_row(who, updated_at=2e9)
        for row in (old, new):
            await store.insert_a2a_task(row)
        for version in (1, 2, 3):
            await store.add_a2a_event(old.id, version, b"event %d" % version, 1000.0 + version)
        await store.add_a2a_event(old.id, 2, b"again", 1000.0)          # one event per version: the first kept
        assert await store.a2a_events(old.id, 1) == [(2, b"event 2"), (3, b"event 3")]
        assert await store.a2a_events(old.id, 0, limit=1) == [(1, b"event 1")]
        # only what is older than the cutoffs goes (1970 here: no other test's rows, but for this test's own
        # running elsewhere on a shared database)
        tasks, events = await store.expire_a2a(tasks_before=1500.0, events_before=1002.5)
        assert tasks >= 1 and events >= 2
        assert await store.a2a_task_by_id(old.id) is None and await store.a2a_task_by_id(new.id) is not None
        assert await store.a2a_events(old.id, 0) == [(3, b"event 3")]


async def test_a2a_tasks_go_with_their_session_and_with_their_agent(durable_url):
    async with open_store(durable_url) as store:
        who = tenant()
        agent = await store.create_agent(who, "desk", DSL)
        session = await store.create_session(who, source="agent", dsl=DSL, agent_id=agent.id)
        ran, other = a2a_row(who, agent.id, context_id=session.id), a2a_row(who, agent.id, context_id="elsewhere")
        for row in (ran, other):
            await store.insert_a2a_task(row)
        assert await store.delete_sessions(who, [session.id]) == [session.id]
        assert await store.a2a_task_by_id(ran.id) is None and await store.a2a_task_by_id(other.id) is not None
        assert await store.delete_agent(who, agent.id) is True
        assert await store.a2a_task_by_id(other.id) is None


async def test_processes_starting_at_once_on_a_new_postgresql_database_set_it_up_once_without_waiting_for_each_other():
    import asyncio

    import psycopg

    from tests.runtime.checkpointers import postgres_url
    base = postgres_url()
    name = f"c2g_fresh_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = base.rsplit("/", 1)[0] + "/" + name

    async def start() -> int:
        async with open_store(url) as store:
            return (await store.list_agents("nobody"))[1]
    try:       # (each store has its own pool: these are three processes as far as PostgreSQL knows)
        assert await asyncio.wait_for(asyncio.gather(start(), start(), start()), 60) == [0, 0, 0]
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

"""The server's store: tokens, agents, sessions and leases, on a SQLite file and on PostgreSQL."""
from __future__ import annotations

import socket
import subprocess
import sys
import uuid

import pytest

from runtime.store import StoreError, open_store, process_owner

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
        stored = await store.get_session(alice, session.id)
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


async def test_a_database_that_dies_with_the_process_is_refused():
    with pytest.raises(StoreError, match="outlives"):
        async with open_store(":memory:"):
            pass

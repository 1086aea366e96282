"""LangGraph Server's store API under `/langgraph/store`, driven by langgraph-sdk's `client.store` unchanged, on
SQLite and PostgreSQL: items under the tenant's own namespaces, its RAGFlow memories among them."""
from __future__ import annotations

import uuid

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError


def client(server, api):
    return get_client(url=server.url + "/langgraph", headers={"Authorization": f"Bearer {api.token}"})


async def test_items_are_put_read_searched_listed_and_deleted(server, alice):
    lg, space = client(server, alice), f"notes-{uuid.uuid4().hex[:6]}"
    await lg.store.put_item([space, "user-1"], "tea", {"text": "green tea in the morning", "kind": "habit"})
    await lg.store.put_item([space, "user-1"], "dog", {"text": "a dog called Rex", "kind": "fact"})
    await lg.store.put_item([space, "user-2"], "city", {"text": "Lisbon", "kind": "fact"})
    item = await lg.store.get_item([space, "user-1"], key="tea")
    assert item["namespace"] == [space, "user-1"] and item["value"]["kind"] == "habit" and item["created_at"]
    facts = await lg.store.search_items([space], filter={"kind": "fact"}, limit=10)
    assert sorted(i["key"] for i in facts["items"]) == ["city", "dog"]
    spaces = await lg.store.list_namespaces(prefix=[space])
    assert sorted(spaces["namespaces"]) == [[space, "user-1"], [space, "user-2"]]
    await lg.store.delete_item([space, "user-1"], key="tea")
    with pytest.raises(NotFoundError):
        await lg.store.get_item([space, "user-1"], key="tea")


async def test_a_tenant_sees_its_own_namespaces_and_its_memories(server, alice, bob):
    space = f"private-{uuid.uuid4().hex[:6]}"
    await client(server, alice).store.put_item([space], "k", {"secret": True})
    with pytest.raises(NotFoundError):
        await client(server, bob).store.get_item([space], key="k")
    assert (await client(server, bob).store.search_items([space]))["items"] == []
    memory = alice.ok("POST", "/memories", {"name": "seen from langgraph", "memory_type": ["raw"], "embd_id": "",
                                            "llm_id": ""})
    alice.ok("POST", "/messages", {"memory_id": [memory["id"]], "agent_id": "a", "session_id": "s",
                                   "user_input": "hello", "agent_response": "hi"})
    settings = await client(server, alice).store.get_item(["memories"], key=memory["id"])
    assert settings["value"]["name"] == "seen from langgraph"
    messages = await client(server, alice).store.search_items(["memory", memory["id"]])
    assert [i["value"]["content"] for i in messages["items"]] == ["User Input: hello\nAgent Response: hi"]


async def test_bad_requests_are_refused_naming_the_field(server, alice):
    import httpx
    headers = {"Authorization": f"Bearer {alice.token}"}
    async with httpx.AsyncClient(base_url=server.url + "/langgraph", headers=headers) as http:
        reply = await http.put("/store/items", json={"namespace": ["a.b"], "key": "k", "value": {}})
        assert reply.status_code == 422 and "namespace" in reply.json()["detail"]
        reply = await http.put("/store/items", json={"namespace": ["a"], "key": "k", "value": [1]})
        assert reply.status_code == 422 and "value" in reply.json()["detail"]
        reply = await http.post("/store/items/search", json={"namespace_prefix": ["a"], "limit": -1})
        assert reply.status_code == 422 and "limit" in reply.json()["detail"]
        reply = await http.get("/store/items", params={"namespace": "a"})
        assert reply.status_code == 422 and "key" in reply.json()["detail"]

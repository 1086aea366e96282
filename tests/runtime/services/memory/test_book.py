"""A tenant's memories and messages (runtime/services/memory/book.py), with RAGFlow's rules, on every store."""
from __future__ import annotations

import uuid

import pytest

from canvas2graph.runtime.services.memory import MemoryBook, MemoryNotFound, MemoryRefused
from canvas2graph.runtime.services.memory.records import DEFAULT_SIZE, message_size


async def test_a_memory_is_created_with_ragflows_defaults_and_names_are_made_unique(book):
    first = await book.create("notes", ["raw", "semantic"], "bge@BAAI", "chat@OpenAI")
    second = await book.create(" notes ", ["raw"])
    assert (first.name, second.name) == ("notes", "notes(1)")
    api = first.api()
    assert api["memory_type"] == ["raw", "semantic"] and api["memory_size"] == DEFAULT_SIZE
    assert (api["forgetting_policy"], api["permissions"], api["temperature"]) == ("FIFO", "me", 0.5)
    assert (await book.get(first.id)).embd_id == "bge@BAAI"
    assert sorted(m.name for m in (await book.list())[0]) == ["notes", "notes(1)"]
    assert [m.name for m in (await book.list(memory_type=["semantic"]))[0]] == ["notes"]


@pytest.mark.parametrize("name, types, message", [
    ("", ["raw"], "Memory name cannot be empty or whitespace."),
    ("x" * 129, ["raw"], "exceeds limit of 128"),
    ("x", "raw", "Memory type must be a list."),
    ("x", ["raw", "dreams"], "'dreams' is not supported"),
])
async def test_bad_settings_are_refused_saying_which(book, name, types, message):
    with pytest.raises(MemoryRefused, match=message.replace("(", r"\(").replace(")", r"\)")):
        await book.create(name, types)


async def test_updates_follow_ragflows_rules(book):
    memory = await book.create("m", ["raw"])
    changed = await book.update(memory.id, {"memory_size": 2048, "temperature": 0.1, "description": "mine",
                                            "memory_type": ["raw", "episodic"]})
    assert (changed.memory_size, changed.temperature, changed.description) == (2048, 0.1, "mine")
    assert changed.extracted_types == ["episodic"]
    for changes, message in [({"memory_size": 11 * 1024 * 1024}, "Memory size"), ({"temperature": 2}, "Temperature"),
                             ({"forgetting_policy": "LRU"}, "Forgetting policy"), ({"permissions": "all"}, "permission")]:
        with pytest.raises(MemoryRefused, match=message):
            await book.update(memory.id, changes)
    await book.add_exchange([memory.id], user_input="q", agent_response="a")
    with pytest.raises(MemoryRefused, match="when memory isn't empty"):
        await book.update(memory.id, {"embd_id": "other@X"})


async def test_an_exchange_is_found_by_search_recent_and_the_memorys_list(book):
    memory = await book.create("m", ["raw"])
    ids = await book.add_exchange([memory.id], user_input="My dog is called Rex", agent_response="A fine name.",
                                  agent_id="agent-1", session_id="session-1", user_id="u1")
    await book.add_exchange([memory.id], user_input="I live in Lisbon", agent_response="A sunny city.",
                            agent_id="agent-2", session_id="session-2", user_id="u2")
    found = await book.search([memory.id], "what is my dog called?")
    assert [m.message_id for m in found] == [ids[memory.id]]
    assert found[0].api()["content"] == "User Input: My dog is called Rex\nAgent Response: A fine name."
    assert await book.search([memory.id], "what is my dog called?", user_id="u2") == []
    assert [m.agent_id for m in await book.recent([memory.id])] == ["agent-2", "agent-1"]
    assert [m.agent_id for m in await book.recent([memory.id], session_id="session-1")] == ["agent-1"]
    rows, total = await book.page(memory.id, agent_ids=["agent-1"])
    assert total == 1 and "content" not in rows[0] and rows[0]["extract"] == []


async def test_forgotten_and_disabled_messages_are_not_searched(book):
    memory = await book.create("m", ["raw"])
    ids = await book.add_exchange([memory.id], user_input="The door code is 4321", agent_response="Noted.")
    message_id = ids[memory.id]
    await book.set_status(memory.id, message_id, False)
    assert await book.search([memory.id], "door code") == []
    assert [m.message_id for m in await book.recent([memory.id])] == [message_id]      # as RAGFlow's recent list
    await book.set_status(memory.id, message_id, True)
    await book.forget(memory.id, message_id)
    assert await book.search([memory.id], "door code") == [] and await book.recent([memory.id]) == []
    assert (await book.message(memory.id, message_id)).forget_at is not None
    assert (await book.page(memory.id))[1] == 1                 # still listed, as forgotten


async def test_fifo_keeps_a_memory_under_its_size_forgetting_the_forgotten_then_the_oldest(book):
    one = message_size("User Input: question 00\nAgent Response: answer 00", None)
    memory = await book.create("m", ["raw"])
    await book.update(memory.id, {"memory_size": one * 10})
    ids = []
    for i in range(10):
        saved = await book.add_exchange([memory.id], user_input=f"question {i:02d}", agent_response=f"answer {i:02d}")
        ids.append(saved[memory.id])
    await book.forget(memory.id, ids[5])
    await book.add_exchange([memory.id], user_input="question 10", agent_response="answer 10")
    kept = {m.message_id for m in await book.messages(memory.id)}
    assert ids[5] not in kept                                   # forgotten by hand: first to go
    assert sum(m.size for m in await book.messages(memory.id)) <= one * 10
    for i in range(11, 40):
        await book.add_exchange([memory.id], user_input=f"question {i:02d}", agent_response=f"answer {i:02d}")
        assert await book.usage(memory.id) <= one * 10
    left = await book.messages(memory.id)
    assert sum(m.size for m in left) == await book.usage(memory.id) <= one * 10
    assert max(int(m.content.split()[3]) for m in left) == 39 and ids[0] not in {m.message_id for m in left}


async def test_saving_the_same_exchange_again_writes_over_it(book):
    memory = await book.create("m", ["raw", "semantic"])
    first = await book.add_exchange([memory.id], user_input="q", agent_response="a", key="session:1:Message:M")
    again = await book.add_exchange([memory.id], user_input="q", agent_response="a", key="session:1:Message:M")
    assert first == again and len(await book.messages(memory.id)) == 1


async def test_tenants_see_their_own_memories_only(store):
    alice, bob = MemoryBook(store, f"a-{uuid.uuid4().hex[:6]}"), MemoryBook(store, f"b-{uuid.uuid4().hex[:6]}")
    memory = await alice.create("private", ["raw"])
    await alice.add_exchange([memory.id], user_input="secret", agent_response="kept")
    assert (await bob.list())[1] == 0
    with pytest.raises(MemoryNotFound):
        await bob.get(memory.id)
    assert await bob.search([memory.id], "secret") == [] and await bob.recent([memory.id]) == []
    with pytest.raises(MemoryNotFound):
        await bob.add_exchange([memory.id], user_input="x", agent_response="y")
    with pytest.raises(MemoryNotFound):
        await bob.delete(memory.id)


async def test_deleting_a_memory_deletes_its_messages(book, store):
    memory = await book.create("m", ["raw", "semantic"])
    await book.add_exchange([memory.id], user_input="q", agent_response="a")
    await book.delete(memory.id)
    with pytest.raises(MemoryNotFound):
        await book.messages(memory.id)
    assert await store.asearch((book.root, "memory")) == []
    assert [i for i in await store.asearch(("c2g_memory_pending",)) if i.value["memory_id"] == memory.id] == []


async def test_with_an_embedding_model_a_search_finds_what_means_the_same(book):
    from canvas2graph.runtime.services.retrieval.embeddings import Embedder, ResolvedEndpoint
    from tests.runtime.services.retrieval.conftest import EmbeddingServer
    server = EmbeddingServer()
    dog = "User Input: My dog is called Rex\nAgent Response: A fine name."
    city = "User Input: I live in Lisbon\nAgent Response: A sunny city."
    server.vectors = {dog: [1.0, 0.0, 0.0], city: [0.0, 1.0, 0.0], "which pet do I have": [0.9, 0.1, 0.0]}
    try:
        endpoint = ResolvedEndpoint("bge@Local", "bge", server.url, "key")
        book.embedder = lambda embd_id: Embedder(endpoint, 10)
        memory = await book.create("m", ["raw"], "bge@Local")
        ids = await book.add_exchange([memory.id], user_input="My dog is called Rex", agent_response="A fine name.")
        await book.add_exchange([memory.id], user_input="I live in Lisbon", agent_response="A sunny city.")
        assert len((await book.message(memory.id, ids[memory.id])).embedding) == 3
        # no word of the query is in either message: the vectors find the dog
        found = await book.search([memory.id], "which pet do I have", keywords_similarity_weight=0.3,
                                  similarity_threshold=0.5)
        assert [m.message_id for m in found] == [ids[memory.id]]
        assert book.notes == []
    finally:
        server.close()


async def test_an_embedding_model_that_is_not_configured_ranks_by_text_and_says_so(book):
    def unconfigured(embd_id):
        raise LookupError(f"{embd_id} is not configured")
    book.embedder = unconfigured
    memory = await book.create("m", ["raw"], "missing@Nowhere")
    await book.add_exchange([memory.id], user_input="My dog is called Rex", agent_response="A fine name.")
    assert len(await book.search([memory.id], "dog")) == 1
    assert any("missing@Nowhere" in n and "ranked by text" in n for n in book.notes)

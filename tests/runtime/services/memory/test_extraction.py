"""Typed memories extracted from a saved exchange by the memory's chat model (runtime/services/memory/extraction.py)."""
from __future__ import annotations

import json

from canvas2graph.runtime.services.memory.book import PENDING
from canvas2graph.runtime.services.memory.extraction import extract_pending, parse
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script

ANSWER = {"semantic": [{"content": "The user's dog is called Rex.", "valid_at": "2026-01-02T03:04:05", "invalid_at": ""}],
          "episodic": [{"content": "ignored: the memory does not keep episodes"}]}


def models(*replies: str) -> ModelFactory:
    return ModelFactory(script=Script.load({"replies": [{"content": r} for r in replies]}))


def test_the_answer_is_read_leniently_keeping_only_the_memorys_kinds():
    text = "```json\n" + json.dumps(ANSWER)[:-1] + "\n```"         # fenced and cut short
    assert parse(text, ["semantic"], "2026-12-01 10:00:00") == [
        ("semantic", "The user's dog is called Rex.", "2026-01-02 03:04:05", None)]
    assert parse("not json at all", ["semantic"], "t") == []
    assert parse(json.dumps({"semantic": ["plain text item", {"content": " "}]}), ["semantic"], "t") == [
        ("semantic", "plain text item", "t", None)]


async def test_pending_exchanges_become_typed_messages_once(book, store):
    memory = await book.create("m", ["raw", "semantic"], llm_id="chat@OpenAI")
    saved = await book.add_exchange([memory.id], user_input="My dog is called Rex", agent_response="Nice.")
    assert await extract_pending(store, models(json.dumps(ANSWER)), tenant=book.tenant) == 1
    typed = [m for m in await book.messages(memory.id) if m.message_type != "raw"]
    assert [(m.message_type, m.content, m.source_id) for m in typed] == [
        ("semantic", "The user's dog is called Rex.", saved[memory.id])]
    assert [m.message_id for m in await book.search([memory.id], "dog name")][0] in {t.message_id for t in typed} | {saved[memory.id]}
    assert await extract_pending(store, models(), tenant=book.tenant) == 0          # nothing left pending


async def test_a_failed_extraction_stays_pending_and_is_tried_again(book, store):
    memory = await book.create("m", ["raw", "semantic"], llm_id="chat@OpenAI")
    await book.add_exchange([memory.id], user_input="My dog is called Rex", agent_response="Nice.")
    failing = ModelFactory(script=Script.load({"replies": [{"error": "provider down"}]}))
    assert await extract_pending(store, failing, tenant=book.tenant) == 0
    [pending] = [i.value for i in await store.asearch(PENDING) if i.value["memory_id"] == memory.id]
    assert pending["attempts"] == 1 and "provider down" in pending["error"]
    assert await extract_pending(store, models(json.dumps(ANSWER)), tenant=book.tenant) == 1
    assert len(await book.messages(memory.id)) == 2


async def test_extracting_again_replaces_what_an_earlier_attempt_wrote(book, store):
    memory = await book.create("m", ["raw", "semantic"], llm_id="chat@OpenAI")
    await book.add_exchange([memory.id], user_input="My dog is called Rex", agent_response="Nice.")
    [item] = [i for i in await store.asearch(PENDING) if i.value["memory_id"] == memory.id]
    await extract_pending(store, models(json.dumps(ANSWER)), tenant=book.tenant)
    await store.aput(PENDING, item.key, item.value)         # a worker died after saving, before dropping the item
    await extract_pending(store, models(json.dumps(ANSWER)), tenant=book.tenant)
    assert sorted(m.message_type for m in await book.messages(memory.id)) == ["raw", "semantic"]


async def test_a_raw_only_memory_leaves_nothing_to_extract(book, store):
    memory = await book.create("m", ["raw"])
    await book.add_exchange([memory.id], user_input="q", agent_response="a")
    assert [i for i in await store.asearch(PENDING) if i.value["memory_id"] == memory.id] == []

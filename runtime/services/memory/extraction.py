"""Typed memories (semantic, episodic, procedural) extracted from a saved exchange by the memory's chat model.

A Message that saves to a memory with typed kinds leaves a pending item beside the raw message
(`book.PENDING`); `extract_pending` turns each into the typed messages and then drops it. It runs after the
turn, never inside it (the answer is not delayed by a second model call): the server queues it as a job on its
job engine when a turn saved something, the worker of any process runs it, and a sweep finds the pending items a
crash left behind; `canvas2graph run` runs it once the answer is out. An extraction is idempotent: the typed
messages of an exchange a dead worker half wrote are replaced, not doubled.

The prompts are our own: one system prompt naming the kinds the memory keeps (or the memory's own
`system_prompt`), and the exchange with its time; the model answers JSON, read with json-repair.
"""
from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from canvas2graph.runtime.services.memory.book import PENDING, MemoryBook, MemoryNotFound, label, new_message_id
from canvas2graph.runtime.services.memory.records import EXTRACTED, TIME_FORMAT, MemoryMessage, exchange_text, now_text

log = logging.getLogger("canvas2graph.memory")

MAX_ATTEMPTS = 3            # a pending exchange whose extraction failed this often is dropped (logged)
PER_KIND = 5                # at most this many memories of each kind from one exchange

KIND_GUIDES = {
    "semantic": "semantic: lasting facts the exchange states or implies - about the user, their preferences, "
                "things, definitions and how things relate - that stay true over time.",
    "episodic": "episodic: what happened - an event, an experience or a decision - with when it happened.",
    "procedural": "procedural: how to do something - steps, methods, rules or habits the user follows or asks for.",
}


def system_prompt(kinds: list[str]) -> str:
    """What the extraction model is told: the kinds to look for, and the JSON to answer with."""
    guides = "\n".join(f"- {KIND_GUIDES[k]}" for k in kinds)
    skeleton = json.dumps({k: [{"content": "...", "valid_at": "YYYY-MM-DDTHH:MM:SS", "invalid_at": ""}] for k in kinds})
    return (
        "You keep an assistant's long-term memory. Read one exchange between a user and the assistant and write "
        "down what is worth remembering in later conversations, as short self-contained statements.\n"
        f"Kinds of memory to write:\n{guides}\n"
        f"Write at most {PER_KIND} items of each kind, and none when nothing qualifies. Each item has `content`, "
        "`valid_at` (when it became true, ISO 8601; the exchange's time when unknown) and `invalid_at` (when it "
        "stops being true, ISO 8601, or an empty string).\n"
        f"Answer with JSON only, shaped as: {skeleton}")


def user_prompt(user_input: str, agent_response: str, when: str, custom: str | None = None) -> list[str]:
    exchange = (f"Exchange:\n{exchange_text(user_input, agent_response)}\n"
                f"Time of the exchange: {when}\nTime now: {now_text()}")
    return [custom, exchange] if custom else [exchange]


def parse(text: str, kinds: list[str], when: str) -> list[tuple[str, str, str, str | None]]:
    """(kind, content, valid_at, invalid_at) of each item of the model's answer, for the kinds the memory keeps."""
    from json_repair import repair_json
    try:
        data = repair_json(text or "", return_objects=True)
    except Exception:       # noqa: BLE001 - nothing readable: nothing extracted
        return []
    if not isinstance(data, dict):
        return []
    out = []
    for kind in kinds:
        items = data.get(kind)
        for item in (items if isinstance(items, list) else [])[:PER_KIND]:
            if isinstance(item, str):
                item = {"content": item}
            if not isinstance(item, dict) or not str(item.get("content") or "").strip():
                continue
            out.append((kind, str(item["content"]).strip(), _time(item.get("valid_at")) or when,
                        _time(item.get("invalid_at"))))
    return out


def _time(value: Any) -> str | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).strftime(TIME_FORMAT)
    except ValueError:
        return None


async def extract_one(book: MemoryBook, pending: dict[str, Any], models: Any) -> int:
    """Extract the typed memories of one pending exchange into its memory; returns how many were saved."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from canvas2graph.runtime.services.model_calls import invoke
    memory = await book.get(pending["memory_id"])
    kinds = memory.extracted_types
    if not kinds:
        return 0
    if not memory.llm_id:
        raise ValueError(f"memory {memory.id} keeps {', '.join(kinds)} memories but has no chat model (llm_id)")
    model = models.chat_model(memory.llm_id, component_id=f"Memory:{memory.id}",
                              gen_conf={"temperature": memory.temperature})
    prompt = [SystemMessage(memory.system_prompt or system_prompt(kinds))] + [
        HumanMessage(p) for p in user_prompt(pending["user_input"], pending["agent_response"], pending["valid_at"],
                                             memory.user_prompt)]
    reply = await invoke(model, prompt)
    items = parse(str(reply.content if isinstance(reply.content, str) else reply.text), kinds, pending["valid_at"])
    source = int(pending["source_id"])
    try:
        raw = await book.message(memory.id, source)
    except MemoryNotFound:
        raw = None                                          # forgotten already: its extracts still stand
    messages = [MemoryMessage(message_id=new_message_id(), memory_id=memory.id, content=content, message_type=kind,
                              source_id=source, valid_at=valid_at, invalid_at=invalid_at,
                              user_id=raw.user_id if raw else "", agent_id=raw.agent_id if raw else "",
                              session_id=raw.session_id if raw else "")
                for kind, content, valid_at, invalid_at in items]
    await book.replace_extracted(memory, source, messages)
    return len(messages)


async def extract_pending(store: Any, models: Any, *, embedder: Any = None, tenant: str | None = None,
                          limit: int = 100) -> int:
    """Extract up to `limit` pending exchanges (of one tenant, or all); returns how many were handled."""
    handled = 0
    wanted = {"root": label(tenant)} if tenant is not None else None
    for item in await store.asearch(PENDING, filter=wanted, limit=limit):
        pending = dict(item.value)
        book = MemoryBook(store, pending.get("tenant", ""), embedder=embedder)
        try:
            count = await extract_one(book, pending, models)
        except MemoryNotFound:
            count = 0                                       # the memory was deleted meanwhile
        except Exception as e:      # noqa: BLE001 - a model or store failure: tried again later, then dropped
            pending["attempts"] = int(pending.get("attempts", 0)) + 1
            pending["error"] = f"{type(e).__name__}: {e}"
            if pending["attempts"] < MAX_ATTEMPTS:
                await store.aput(PENDING, item.key, pending, index=False)
                log.warning("memory %s: extraction failed (%s); will try again", pending.get("memory_id"), e)
                continue
            log.error("memory %s: extraction of message %s given up after %d attempts: %s",
                      pending.get("memory_id"), pending.get("source_id"), MAX_ATTEMPTS, e)
            count = 0
        await store.adelete(PENDING, item.key)
        handled += 1
        log.info("memory %s: %d memories extracted from message %s", pending.get("memory_id"), count,
                 pending.get("source_id"))
    return handled


__all__ = ["EXTRACTED", "extract_one", "extract_pending", "parse", "system_prompt"]

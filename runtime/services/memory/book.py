"""`MemoryBook`: one tenant's memories and their messages, as operations on a LangGraph store.

Every operation RAGFlow's memory API and components need goes through here: create, list, update and delete
memories; save an exchange (a raw message, plus a pending item for its typed extraction); list, search, recent,
forget, enable or disable and read messages. The store is any LangGraph `BaseStore` (its async methods).

Forgetting (FIFO): a memory's messages weigh what RAGFlow counts (`records.message_size`); when a save would take
the memory past its `memory_size`, the messages forgotten by hand go first (earliest forgotten first), then the
oldest, until the memory is back to `FORGET_TO` of its size: a full memory pays for a scan of its messages once per
tenth of its size, not at every save.
"""
from __future__ import annotations

import asyncio
import logging
import random
import re
import time
import weakref
from typing import Any, Callable, Iterable

from canvas2graph.runtime.services.memory import ranking
from canvas2graph.runtime.services.memory.records import (
    NAME_LIMIT, PERMISSIONS, POLICIES, SIZE_LIMIT, Memory, MemoryMessage, exchange_text, memory_types,
    message_size, now_ms, now_text, searchable_text)

log = logging.getLogger("canvas2graph.memory")

PENDING = ("c2g_memory_pending",)   # exchanges whose typed memories are still to extract, for every tenant
# items read per store search while scanning a memory: LangGraph's stores page with ORDER BY ... OFFSET, which reads
# and sorts every item again for each page, so a scan in pages of 500 grew with the square of the memory
PAGE = 10_000
FORGET_TO = 0.9                     # a full memory forgets down to this share of its memory_size
_locks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Lock]]" = \
    weakref.WeakKeyDictionary()     # per event loop: an asyncio lock belongs to the loop it was made in


class MemoryRefused(Exception):
    """A request the memory cannot take (RAGFlow's argument errors): the message says which field and why."""


class MemoryNotFound(MemoryRefused):
    pass


def label(text: str) -> str:
    """A namespace label (LangGraph's labels may not hold a dot). No tenant (`run`, a LangGraph user's graph) is
    "%00", which no escaped tenant name can be."""
    return text.replace("%", "%25").replace(".", "%2E") if text else "%00"


def new_message_id() -> int:
    # RAGFlow's ids are integers from one sequence; a store has no sequence, so: milliseconds x 1000 + a random
    # part (below 2**53, the largest integer a browser reads exactly, until the year 2255)
    return int(time.time() * 1000) * 1000 + random.randrange(1000)


def stable_message_id(key: str, memory_id: str) -> int:
    """A message id that `key` always gives in this memory (52 bits of a hash)."""
    import hashlib
    return int(hashlib.sha1(f"{key}\x1f{memory_id}".encode("utf-8")).hexdigest()[:13], 16)


def _lock(root: str, memory_id: str) -> asyncio.Lock:
    """Saves and changes of one memory, one at a time in this process (its usage count is read, then written)."""
    return _locks.setdefault(asyncio.get_running_loop(), {}).setdefault((root, memory_id), asyncio.Lock())


class MemoryBook:
    """A tenant's memories in `store`. `embedder(embd_id)` gives an object with `embed_query` and
    `embed_documents` (retrieval's `Embedder`); without one, or when it fails, search ranks by text and says so
    in `notes`."""

    def __init__(self, store: Any, tenant: str = "", *, embedder: Callable[[str], Any] | None = None):
        self.store, self.tenant, self.root = store, tenant, label(tenant)
        self.embedder = embedder
        self.notes: list[str] = []

    # --- namespaces --------------------------------------------------------------------------------
    @property
    def _configs(self) -> tuple[str, ...]:
        return (self.root, "memories")

    def _messages(self, memory_id: str) -> tuple[str, ...]:
        return (self.root, "memory", label(memory_id))

    @property
    def _usage(self) -> tuple[str, ...]:
        return (self.root, "memory_usage")

    # --- memories -----------------------------------------------------------------------------------
    async def create(self, name: Any, memory_type: Any, embd_id: str = "", llm_id: str = "", **settings: Any) -> Memory:
        name = _name(name)
        if not isinstance(memory_type, list):
            raise MemoryRefused("Memory type must be a list.")
        try:
            bits = memory_types([str(t) for t in memory_type])
        except ValueError as e:
            raise MemoryRefused(f"{str(e)[0].upper()}{str(e)[1:]}.") from None
        memory = Memory(id=_uuid(), name=await self._unique(name), tenant_id=self.tenant, memory_type=bits,
                        embd_id=str(embd_id or ""), llm_id=str(llm_id or ""))
        if settings:
            _apply(memory, settings)
        await self.store.aput(self._configs, memory.id, memory.value(), index=False)
        return memory

    async def get(self, memory_id: str) -> Memory:
        item = await self.store.aget(self._configs, str(memory_id)) if memory_id else None
        if item is None:
            raise MemoryNotFound(f"Memory '{memory_id}' not found.")
        return Memory.from_value(item.value)

    async def find(self, memory_ids: Iterable[str]) -> list[Memory]:
        """Those of `memory_ids` that exist here, in the order given."""
        out = []
        for memory_id in dict.fromkeys(str(m) for m in memory_ids if m):
            try:
                out.append(await self.get(memory_id))
            except MemoryNotFound:
                pass
        return out

    async def all(self) -> list[Memory]:
        return [Memory.from_value(item.value) async for item in self._scan(self._configs)]

    async def list(self, *, page: int = 1, page_size: int = 30, memory_type: list[str] | None = None,
                   keywords: str | None = None, storage_type: str | None = None) -> tuple[list[Memory], int]:
        mask = memory_types(memory_type) if memory_type else 0
        found = [m for m in await self.all()
                 if (not mask or m.memory_type & mask) and (not keywords or keywords in m.name)
                 and (not storage_type or m.storage_type == storage_type)]
        found.sort(key=lambda m: m.create_time, reverse=True)
        start = (max(page, 1) - 1) * page_size
        return found[start:start + page_size], len(found)

    async def update(self, memory_id: str, changes: dict[str, Any]) -> Memory:
        async with _lock(self.root, memory_id):
            memory = await self.get(memory_id)
            before = memory.value()
            if "name" in changes:
                name = _name(changes["name"])
                if name != memory.name:
                    memory.name = await self._unique(name)
            if changes.get("memory_type") or changes.get("embd_id"):
                new_types = memory.memory_type
                if changes.get("memory_type"):
                    if not isinstance(changes["memory_type"], list):
                        raise MemoryRefused("Memory type must be a list.")
                    try:
                        new_types = memory_types([str(t) for t in changes["memory_type"]])
                    except ValueError as e:
                        raise MemoryRefused(f"{str(e)[0].upper()}{str(e)[1:]}.") from None
                moved = [k for k, same in (("embd_id", str(changes.get("embd_id") or memory.embd_id).strip() == memory.embd_id),
                                           ("memory_type", new_types == memory.memory_type)) if not same]
                if moved and await self.usage(memory_id) > 0:
                    raise MemoryRefused(f"Can't update {moved} when memory isn't empty.")
                memory.memory_type = new_types
                if changes.get("embd_id"):
                    memory.embd_id = str(changes["embd_id"]).strip()
            _apply(memory, {k: v for k, v in changes.items() if k not in ("name", "memory_type", "embd_id")})
            if memory.value() != before:
                memory.update_time = now_ms()
                await self.store.aput(self._configs, memory.id, memory.value(), index=False)
            return memory

    async def delete(self, memory_id: str) -> None:
        """The memory and every message of it (and its pending extractions)."""
        await self.get(memory_id)
        async with _lock(self.root, memory_id):
            await self._delete_keys(self._messages(memory_id), [i.key async for i in self._scan(self._messages(memory_id))])
            await self._delete_keys(PENDING, [i.key async for i in self._scan(PENDING, {"root": self.root, "memory_id": memory_id})])
            await self.store.adelete(self._usage, memory_id)
            await self.store.adelete(self._configs, memory_id)

    async def _unique(self, name: str) -> str:
        """RAGFlow's de-duplication: a name taken in the tenant gets "(1)", "(2)", ..."""
        taken = {m.name for m in await self.all()}
        candidate, n = name, 0
        while candidate in taken:
            n += 1
            base = re.sub(r"\(\d+\)$", "", name)
            candidate = f"{base}({n})"
        if len(candidate) > NAME_LIMIT:
            raise MemoryRefused(f"Memory name '{candidate}' exceeds limit of {NAME_LIMIT}.")
        return candidate

    # --- saving ----------------------------------------------------------------------------------------
    async def add_exchange(self, memory_ids: Iterable[str], *, user_input: str, agent_response: str,
                           agent_id: str = "", session_id: str = "", user_id: str = "",
                           key: str | None = None) -> dict[str, int]:
        """Save one exchange to each of the memories: its raw message now, its typed memories later (a pending
        item each, for `extraction.extract_pending`). Returns memory id -> raw message id; ids that name no memory
        of this tenant raise MemoryNotFound after the others are saved. With a `key`, the message ids derive from
        it: saving the same exchange again (a step run again after a crash) writes over the first save."""
        wanted = [str(m) for m in memory_ids if m]
        memories = await self.find(wanted)
        saved = {}
        for memory in memories:
            message_id = stable_message_id(key, memory.id) if key else new_message_id()
            message = MemoryMessage(message_id=message_id, memory_id=memory.id, user_id=str(user_id or ""),
                                    agent_id=str(agent_id or ""), session_id=str(session_id or ""),
                                    content=exchange_text(str(user_input or ""), str(agent_response or "")))
            await self.save(memory, [message])
            if memory.extracted_types:
                await self.store.aput(PENDING, f"{memory.id}-{message.message_id}", {
                    "root": self.root, "tenant": self.tenant, "memory_id": memory.id, "source_id": message.message_id,
                    "user_input": str(user_input or ""), "agent_response": str(agent_response or ""),
                    "valid_at": message.valid_at, "attempts": 0}, index=False)
            saved[memory.id] = message.message_id
        missing = [m for m in wanted if m not in saved]
        if missing:
            raise MemoryNotFound(f"Memory {missing} not found.")
        return saved

    async def save(self, memory: Memory, messages: list[MemoryMessage]) -> None:
        """Store messages of `memory` (tokens, vectors and sizes filled in), forgetting first if they would not fit."""
        vectors = await self._embed(memory, [m.content for m in messages])
        # in a thread: the tokenizer's first use loads it (about a second), and a process's loop serves other turns
        tokens = await asyncio.to_thread(lambda: [ranking.tokens(searchable_text(m)) for m in messages])
        for message, vector, words in zip(messages, vectors, tokens):
            message.tokens = words
            message.embedding = vector
            message.size = message_size(message.content, vector)
        added = sum(m.size for m in messages)
        async with _lock(self.root, memory.id):
            used = await self.usage(memory.id)
            if used + added > memory.memory_size:
                used = await self._forget_for(memory, added)
            for message in messages:
                await self.store.aput(self._messages(memory.id), str(message.message_id), message.value(), index=False)
            # a running count: it drifts up when a message is saved again under its id (a step run again) and down
            # when two processes save to one memory at once (this lock is per process); the forgetting pass counts
            # exactly before it forgets, so a drift delays or hastens forgetting, never loses a message
            await self.store.aput(self._usage, memory.id, {"bytes": used + added}, index=False)

    async def replace_extracted(self, memory: Memory, source_id: int, messages: list[MemoryMessage]) -> None:
        """Save the typed messages extracted from message `source_id` in place of any an earlier attempt left
        (a worker that died half-way: its extracts are replaced, not doubled)."""
        earlier = [i.key async for i in self._scan(self._messages(memory.id), {"source_id": source_id})]
        if earlier:
            async with _lock(self.root, memory.id):
                await self._delete_keys(self._messages(memory.id), earlier)
        if messages:
            await self.save(memory, messages)

    async def usage(self, memory_id: str) -> int:
        item = await self.store.aget(self._usage, memory_id)
        return int(item.value.get("bytes", 0)) if item is not None else 0

    async def _forget_for(self, memory: Memory, incoming: int) -> int:
        """Forget messages until `incoming` bytes fit under FORGET_TO of the memory's size; returns what is left."""
        messages = [MemoryMessage.from_value(i.value) async for i in self._scan(self._messages(memory.id))]
        used = sum(m.size for m in messages)        # counted again: another process's saves are counted too
        target = max(int(memory.memory_size * FORGET_TO) - incoming, 0)
        order = sorted((m for m in messages if m.forget_at), key=lambda m: (m.forget_at, m.created)) + \
            sorted((m for m in messages if not m.forget_at), key=lambda m: (m.valid_at, m.created))
        gone = []
        for m in order:
            if used <= target:
                break
            gone.append(str(m.message_id))
            used -= m.size
        await self._delete_keys(self._messages(memory.id), gone)
        if gone:
            log.info("memory %s: forgot %d messages (FIFO) to stay under %d bytes", memory.id, len(gone),
                     memory.memory_size)
        return used

    async def _embed(self, memory: Memory, texts: list[str]) -> list[list[float] | None]:
        embedder = self._embedder_for(memory)
        if embedder is None or not texts:
            return [None] * len(texts)
        try:
            return [list(map(float, v)) for v in await embedder.embed_documents(texts)]
        except Exception as e:      # noqa: BLE001 - RetrievalError and its kin: saved without a vector
            self._note(f"memory {memory.id}: embedding model {memory.embd_id!r} failed ({e}); saved without a vector")
            return [None] * len(texts)

    def embedder_problem(self, memory: Memory) -> str | None:
        """Why a search of this memory ranks by text alone (no embedding model, or one that is not configured);
        None when it ranks by meaning too."""
        if not memory.embd_id:
            return "it has no embedding model: searches rank messages by their words alone"
        if self.embedder is None:
            return f"no embedding model can be reached here ({memory.embd_id!r}): searches rank by words alone"
        try:
            self.embedder(memory.embd_id)
        except Exception as e:      # noqa: BLE001 - not configured
            return f"its embedding model {memory.embd_id!r} is not configured ({e}): searches rank by words alone"
        return None

    def _embedder_for(self, memory: Memory):
        if not memory.embd_id or self.embedder is None:
            return None
        try:
            return self.embedder(memory.embd_id)
        except Exception as e:      # noqa: BLE001 - not configured: the memory is ranked by text
            self._note(f"memory {memory.id}: embedding model {memory.embd_id!r} is not available ({e}); "
                       "messages are ranked by text")
            return None

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)
            log.warning("%s", note)

    # --- reading ----------------------------------------------------------------------------------------
    async def messages(self, memory_id: str, *, include_forgotten: bool = True) -> list[MemoryMessage]:
        await self.get(memory_id)
        found = [MemoryMessage.from_value(i.value) async for i in self._scan(self._messages(memory_id))]
        return [m for m in found if include_forgotten or not m.forget_at]

    async def page(self, memory_id: str, *, page: int = 1, page_size: int = 50, agent_ids: list[str] | None = None,
                   keywords: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """The memory's raw messages, newest first, each with its typed memories as `extract` (RAGFlow's list)."""
        everything = await self.messages(memory_id)
        raw = [m for m in everything if m.message_type == "raw" and (not agent_ids or m.agent_id in agent_ids)
               and (not keywords or keywords in m.session_id)]
        raw.sort(key=lambda m: (m.valid_at, m.created), reverse=True)
        start = (max(page, 1) - 1) * page_size
        children: dict[int, list[MemoryMessage]] = {}
        for m in everything:
            if m.source_id is not None:
                children.setdefault(m.source_id, []).append(m)
        out = []
        for m in raw[start:start + page_size]:
            row = m.api(content=False)
            row["extract"] = [c.api(content=False) for c in children.get(m.message_id, [])]
            out.append(row)
        return out, len(raw)

    async def _candidates(self, memories: list[Memory], agent_id: str, session_id: str, user_id: str) -> list[MemoryMessage]:
        out = []
        for memory in memories:
            wanted = {k: v for k, v in (("agent_id", agent_id), ("user_id", user_id)) if v}
            async for item in self._scan(self._messages(memory.id), wanted or None):
                m = MemoryMessage.from_value(item.value)
                if not m.forget_at and (not session_id or session_id in m.session_id):
                    out.append(m)
        return out

    async def recent(self, memory_ids: Iterable[str], *, agent_id: str = "", session_id: str = "",
                     limit: int = 10) -> list[MemoryMessage]:
        found = await self._candidates(await self.find(memory_ids), agent_id, session_id, "")
        found.sort(key=lambda m: (m.valid_at, m.created), reverse=True)
        return found[:limit]

    async def search(self, memory_ids: Iterable[str], query: str, *, similarity_threshold: float = 0.2,
                     keywords_similarity_weight: float = 0.7, top_n: int = 5, agent_id: str = "",
                     session_id: str = "", user_id: str = "") -> list[MemoryMessage]:
        """The enabled, unforgotten messages most like `query`, best first (at most `top_n`, each at least
        `similarity_threshold` alike)."""
        memories = await self.find(memory_ids)
        found = [m for m in await self._candidates(memories, agent_id, session_id, user_id) if m.status]
        if not found or not str(query or "").strip():
            return []
        query_vector = await self._query_vector(memories, query)
        if query_vector is None and similarity_threshold > 0:
            # ranked by text alone: a message with none of the query's words scores 0, so it is not ranked
            words = set(await asyncio.to_thread(ranking.tokens, query))
            found = [m for m in found if not words.isdisjoint(m.tokens)]
        scores = await asyncio.to_thread(ranking.rank, query, [m.tokens for m in found], [m.embedding for m in found],
                                         query_vector, keywords_similarity_weight)
        ranked = sorted(((s, m) for s, m in zip(scores, found) if s >= similarity_threshold),
                        key=lambda sm: sm[0], reverse=True)
        return [m for _, m in ranked[:top_n]]

    async def _query_vector(self, memories: list[Memory], query: str) -> list[float] | None:
        models = {m.embd_id for m in memories if m.embd_id}
        if len(models) != 1:
            if len(models) > 1:
                self._note("the memories use different embedding models; ranked by text")
            return None
        embedder = self._embedder_for(memories[0] if memories[0].embd_id else next(m for m in memories if m.embd_id))
        if embedder is None:
            return None
        try:
            return list(map(float, await embedder.embed_query(query)))
        except Exception as e:      # noqa: BLE001
            self._note(f"embedding the query failed ({e}); ranked by text")
            return None

    async def message(self, memory_id: str, message_id: Any) -> MemoryMessage:
        await self.get(memory_id)
        item = await self.store.aget(self._messages(memory_id), str(_message_id(message_id)))
        if item is None:
            raise MemoryNotFound(f"Message '{message_id}' in memory '{memory_id}' not found.")
        return MemoryMessage.from_value(item.value)

    async def forget(self, memory_id: str, message_id: Any) -> None:
        """Mark a message forgotten: no search or recent list finds it, and FIFO drops it first."""
        await self._change(memory_id, message_id, forget_at=now_text())

    async def set_status(self, memory_id: str, message_id: Any, status: bool) -> None:
        await self._change(memory_id, message_id, status=bool(status))

    async def _change(self, memory_id: str, message_id: Any, **changes: Any) -> None:
        async with _lock(self.root, memory_id):
            message = await self.message(memory_id, message_id)
            for k, v in changes.items():
                setattr(message, k, v)
            await self.store.aput(self._messages(memory_id), str(message.message_id), message.value(), index=False)

    # --- the store ---------------------------------------------------------------------------------------
    async def _scan(self, namespace: tuple[str, ...], filter: dict[str, Any] | None = None):
        offset = 0
        while True:
            items = await self.store.asearch(namespace, filter=filter, limit=PAGE, offset=offset)
            for item in items:
                if tuple(item.namespace) == tuple(namespace):
                    yield item
            if len(items) < PAGE:
                return
            offset += PAGE

    async def _delete_keys(self, namespace: tuple[str, ...], keys: list[str]) -> None:
        from langgraph.store.base import PutOp
        for i in range(0, len(keys), PAGE):
            await self.store.abatch([PutOp(namespace, k, None) for k in keys[i:i + PAGE]])


def _uuid() -> str:
    import uuid
    return uuid.uuid4().hex


def _message_id(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise MemoryRefused(f"message id {value!r} is not an integer") from None


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise MemoryRefused("Memory name cannot be empty or whitespace.")
    name = name.strip()
    if len(name) > NAME_LIMIT:
        raise MemoryRefused(f"Memory name '{name}' exceeds limit of {NAME_LIMIT}.")
    return name


def _apply(memory: Memory, changes: dict[str, Any]) -> None:
    """RAGFlow's update rules for the settings other than name, types and embedding model."""
    if changes.get("permissions"):
        if changes["permissions"] not in PERMISSIONS:
            raise MemoryRefused(f"Unknown permission '{changes['permissions']}'.")
        memory.permissions = changes["permissions"]
    if changes.get("llm_id"):
        memory.llm_id = str(changes["llm_id"])
    if changes.get("memory_size"):
        try:
            size = int(changes["memory_size"])
        except (TypeError, ValueError):
            size = -1
        if not 0 < size <= SIZE_LIMIT:
            raise MemoryRefused(f"Memory size should be in range (0, {SIZE_LIMIT}] Bytes.")
        memory.memory_size = size
    if changes.get("forgetting_policy"):
        if changes["forgetting_policy"] not in POLICIES:
            raise MemoryRefused(f"Forgetting policy '{changes['forgetting_policy']}' is not supported.")
        memory.forgetting_policy = changes["forgetting_policy"]
    if "temperature" in changes:
        try:
            temperature = float(changes["temperature"])
        except (TypeError, ValueError):
            temperature = -1.0
        if not 0 <= temperature <= 1:
            raise MemoryRefused("Temperature should be in range [0, 1].")
        memory.temperature = temperature
    for key in ("avatar", "description", "system_prompt", "user_prompt"):
        if key in changes:
            memory.__setattr__(key, None if changes[key] is None else str(changes[key]))


__all__ = ["MemoryBook", "MemoryRefused", "MemoryNotFound", "PENDING", "label", "new_message_id"]

"""The shapes of memories and their messages, with RAGFlow's names, defaults and limits."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# RAGFlow's MemoryType bits, in its order
TYPES = {"raw": 1, "semantic": 2, "episodic": 4, "procedural": 8}
EXTRACTED = ("semantic", "episodic", "procedural")
NAME_LIMIT = 128
SIZE_LIMIT = 10 * 1024 * 1024           # bytes: the largest memory_size RAGFlow accepts
DEFAULT_SIZE = 5 * 1024 * 1024
POLICIES = ("FIFO",)
PERMISSIONS = ("me", "team")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"       # valid_at, invalid_at and forget_at, local time as RAGFlow writes them


def memory_types(names: list[str]) -> int:
    """The bit set of type names; unknown names raise ValueError naming them."""
    unknown = [n for n in names if n not in TYPES]
    if unknown:
        raise ValueError(f"memory type {', '.join(map(repr, unknown))} is not supported "
                         f"(use {', '.join(TYPES)})")
    bits = 0
    for n in names:
        bits |= TYPES[n]
    return bits


def type_names(bits: int) -> list[str]:
    return [name for name, bit in TYPES.items() if bits & bit]


def now_text() -> str:
    return time.strftime(TIME_FORMAT, time.localtime())


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Memory:
    """A memory's settings, as RAGFlow's `memory` table has them (`memory_type` a bit set here, names outside)."""
    id: str
    name: str
    tenant_id: str
    memory_type: int = TYPES["raw"]
    embd_id: str = ""
    llm_id: str = ""
    storage_type: str = "table"
    permissions: str = "me"
    description: str | None = None
    avatar: str | None = None
    memory_size: int = DEFAULT_SIZE
    forgetting_policy: str = "FIFO"
    temperature: float = 0.5
    system_prompt: str | None = None
    user_prompt: str | None = None
    create_time: int = field(default_factory=now_ms)
    update_time: int = field(default_factory=now_ms)

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> "Memory":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in known})

    def value(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def extracted_types(self) -> list[str]:
        return [t for t in EXTRACTED if self.memory_type & TYPES[t]]

    def api(self) -> dict[str, Any]:
        """The memory as RAGFlow's API returns it."""
        out = self.value()
        out["memory_type"] = type_names(self.memory_type)
        out["owner_name"] = None
        out["create_date"] = _date(self.create_time)
        out["update_date"] = _date(self.update_time)
        return out


def _date(ms: int) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(ms / 1000))


# what search, recent and list return of a message (RAGFlow's 12 keys; list leaves `content` out)
API_KEYS = ("message_id", "message_type", "source_id", "memory_id", "user_id", "agent_id", "session_id",
            "valid_at", "invalid_at", "forget_at", "status", "content")


@dataclass
class MemoryMessage:
    """One message of a memory: a raw exchange, or a memory extracted from one (`source_id` is its id)."""
    message_id: int
    memory_id: str
    content: str
    message_type: str = "raw"
    source_id: int | None = None
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    valid_at: str = field(default_factory=now_text)
    invalid_at: str | None = None
    forget_at: str | None = None
    status: bool = True
    size: int = 0                       # bytes counted against the memory's memory_size
    created: float = field(default_factory=time.time)   # the order FIFO forgets in, among equal valid_at
    tokens: list[str] = field(default_factory=list)     # the content's search tokens, kept so a search needs no tokenizing
    embedding: list[float] | None = None

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> "MemoryMessage":
        return cls(**{k: v for k, v in value.items() if k in _MESSAGE_FIELDS})

    def value(self) -> dict[str, Any]:
        return asdict(self)

    def api(self, *, content: bool = True) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in API_KEYS}
        if not content:
            del out["content"]
        return out


_MESSAGE_FIELDS = frozenset(f.name for f in fields(MemoryMessage))


def exchange_text(user_input: str, agent_response: str) -> str:
    """A raw message's content: the exchange, as RAGFlow writes it."""
    return f"User Input: {user_input}\nAgent Response: {agent_response}"


def message_size(content: str, embedding: list[float] | None) -> int:
    """Bytes counted against memory_size, as RAGFlow counts them: the text's and the vector's Python sizes."""
    import sys
    return sys.getsizeof(content) + (sys.getsizeof(0.0) * len(embedding) if embedding else 0)


def searchable_text(message: MemoryMessage) -> str:
    """What a search matches of a message: a raw one's exchange without its "User Input:" and "Agent Response:"
    labels (every raw message has them: they would match every query that names them)."""
    if message.message_type != "raw":
        return message.content
    return message.content.replace("User Input: ", "", 1).replace("\nAgent Response: ", "\n", 1)

"""What the store (`server/backend/store.py`) hands out: agents, sessions, versions and webhook calls as records,
read from their rows; and the rules for agents' tags.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

TAG_MAX_CHARS, TAGS_MAX_CHARS = 64, 512


class StoreError(Exception):
    """A store request that cannot be done as asked (a duplicate title, say)."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Agent:
    id: str
    tenant: str
    title: str
    dsl: Any
    description: str | None = None
    avatar: str | None = None
    create_time: int = 0
    update_time: int = 0
    tags: str = ""                    # comma-separated, as RAGFlow stores them
    canvas_type: str | None = None

    @property
    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(",") if t]


@dataclass
class Session:
    id: str
    tenant: str
    agent_id: str | None
    source: str                       # "agent" (created by the sessions route), "workflow" or "graph"
    dsl: Any
    name: str = ""
    user_id: str = ""
    messages: list = field(default_factory=list)
    reference: list = field(default_factory=list)
    create_time: int = 0
    update_time: int = 0
    dsl_text: str = ""                # the DSL as stored: the compile cache keys on it
    version_id: str | None = None     # the agent version the session started with (its DSL is `dsl`)
    version_title: str | None = None


@dataclass
class Version:
    """One saved DSL of an agent: who saved it, when, and what the compiler said about it."""
    id: str
    agent_id: str
    tenant: str
    title: str
    released: bool
    create_time: int
    update_time: int
    created_by: str = ""
    description: str | None = None
    dsl: Any = None                   # None in listings
    diagnostics: dict | None = None   # {"compiles": bool, "diagnostics": [...]}; None in listings


@dataclass
class WebhookCall:
    """One request a webhook received, and how its run went."""
    id: str
    tenant: str
    agent_id: str
    is_test: bool
    mode: str                         # "Immediately" (answered at once, run in the background) or "Streaming"
    status: str                       # running, finished, paused, stopped, cancelled, failed, rejected, interrupted
    start_ts: float
    session_id: str | None = None
    method: str = ""
    client: str = ""
    http_status: int | None = None
    error: str | None = None
    end_ts: float | None = None
    request: dict = field(default_factory=dict)   # the run's request ({query, inputs, user_id}), to resume it
    owner: str | None = None          # the server process that accepted it


def agent_from_row(row: dict) -> Agent:
    return Agent(id=row["id"], tenant=row["tenant"], title=row["title"], dsl=json.loads(row["dsl"]),
                 description=row["description"], avatar=row["avatar"], create_time=row["create_time"],
                 update_time=row["update_time"], tags=row.get("tags") or "", canvas_type=row.get("canvas_type"))


def session_from_row(row: dict, with_dsl: bool = True) -> Session:
    return Session(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], source=row["source"],
                   dsl=json.loads(row["dsl"]) if with_dsl else None, dsl_text=row["dsl"] if with_dsl else "",
                   name=row["name"] or "", user_id=row["user_id"] or "", messages=json.loads(row["messages"]),
                   reference=json.loads(row["reference"]), create_time=row["create_time"],
                   update_time=row["update_time"], version_id=row.get("version_id"),
                   version_title=row.get("version_title"))


def version_from_row(row: dict) -> Version:
    return Version(id=row["id"], agent_id=row["agent_id"], tenant=row["tenant"], title=row["title"] or "",
                   released=bool(row["released"]), create_time=row["create_time"], update_time=row["update_time"],
                   created_by=row.get("created_by") or "", description=row.get("description"),
                   dsl=json.loads(row["dsl"]) if row.get("dsl") is not None else None,
                   diagnostics=json.loads(row["diagnostics"]) if row.get("diagnostics") is not None else None)


def webhook_call_from_row(row: dict) -> WebhookCall:
    return WebhookCall(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], is_test=bool(row["is_test"]),
                       mode=row["mode"], status=row["status"], start_ts=row["start_ts"], session_id=row["session_id"],
                       method=row["method"] or "", client=row["client"] or "", http_status=row["http_status"],
                       error=row["error"], end_ts=row["end_ts"], request=json.loads(row["request"]),
                       owner=row["owner"])


def normalize_tags(tags: Any) -> str:
    """RAGFlow's tag rules: a list or a comma-separated text; commas inside a tag become spaces, tags are
    cut to 64 characters, case-insensitive duplicates dropped, and the whole kept within 512 characters."""
    if isinstance(tags, (list, tuple)):
        cleaned = [str(t).replace(",", " ").strip() for t in tags if t is not None and str(t).strip()]
    else:
        cleaned = [t.strip() for t in str(tags or "").split(",") if t.strip()]
    kept: list[str] = []
    seen: set[str] = set()
    used = 0
    for tag in cleaned:
        tag = tag[:TAG_MAX_CHARS]
        if tag.lower() in seen:
            continue
        extra = len(tag) + (1 if kept else 0)
        if used + extra > TAGS_MAX_CHARS:
            break
        seen.add(tag.lower())
        kept.append(tag)
        used += extra
    return ",".join(kept)

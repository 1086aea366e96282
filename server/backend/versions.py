"""Agent versions: every save of an agent's DSL is kept, and a session runs the version it started with.

A save (create, update, reset, an agent made from a template) records a version: who saved it, when,
the DSL and what the compiler said about it (`Store.save_version` keeps RAGFlow's rules: an unchanged
DSL refreshes the latest version, released versions are never changed, 20 drafts are kept).
A version saved with `release` is *published*: new sessions asked for with `release: true` run the
newest published version instead of the current draft, as in RAGFlow.

A session stores the DSL it runs (`c2g_sessions.dsl`) and the id of that version, so saving the agent
again changes only sessions started afterwards. Restoring an old version is a save of its DSL (see
docs/compatibility.md, "Versions").
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from canvas2graph.server.backend.store import Agent, Store, Version


class NoReleasedVersion(Exception):
    """`release: true` was asked for an agent that has never been published."""


def dsl_diagnostics(dsl: Any) -> dict:
    """`{"compiles": bool, "diagnostics": [...]}`: what the compiler says about a DSL."""
    from canvas2graph.compiler.canvas import diagnose
    compiled, diags = diagnose(dsl)
    return {"compiles": compiled is not None, "diagnostics": [d.to_dict() for d in diags]}


def version_title(author: str, agent_title: str, when: float | None = None) -> str:
    """RAGFlow's version names: `<author>_<agent title>_<local date and time>`."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    return f"{(author or '').strip() or 'tenant'}_{(agent_title or '').strip() or 'agent'}_{stamp}"


async def record_version(store: Store, agent: Agent, *, author: str, released: bool = False,
                         diagnostics: dict | None = None) -> Version:
    """Keep the agent's current DSL as a version (compiled off the event loop: a large DSL takes a while;
    `diagnostics`, when the caller has them already, spares compiling again: the server's come from a
    compile worker with a time and memory budget)."""
    if diagnostics is None:
        diagnostics = await asyncio.to_thread(dsl_diagnostics, agent.dsl)
    return await store.save_version(agent.tenant, agent.id, agent.dsl, title=version_title(author, agent.title),
                                    diagnostics=diagnostics, created_by=author, released=released,
                                    description=agent.description)


async def dsl_for_new_session(store: Store, agent: Agent, *, release: bool = False) -> tuple[Any, Version | None]:
    """The DSL a new session of `agent` runs, and the version it is.

    The current draft, or with `release` the newest published version (NoReleasedVersion without one).
    The draft's version is the latest one when that holds the same DSL (agents saved before versions
    were kept have none).
    """
    if release:
        published = await store.latest_version(agent.tenant, agent.id, released=True)
        if published is None:
            raise NoReleasedVersion(f"agent {agent.id} has no published version: save it with \"release\": true first")
        return published.dsl, published
    latest = await store.latest_version(agent.tenant, agent.id)
    return agent.dsl, latest if latest is not None and latest.dsl == agent.dsl else None


def truthy(value: Any) -> bool:
    """RAGFlow's reading of flags such as `release`: true, 1, "true", "yes", "on"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return False

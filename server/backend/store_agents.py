"""Agents in the store: a tenant's titled DSLs, their tags, and deleting an agent with all it owns."""
from __future__ import annotations

import json
import uuid
from typing import Any

from canvas2graph.server.backend.store_records import Agent, StoreError, agent_from_row, normalize_tags, now_ms
from canvas2graph.server.backend.store_sql import is_integrity_error, like_literal, order_by, page_window


class AgentTables:
    """`Store`'s agents and tags. Deleting an agent deletes its sessions, versions, webhook log
    and its A2A tasks through `Store`'s other tables (`SessionTables`, `VersionTables`, `WebhookTables`,
    `A2ATables`)."""

    db: Any

    async def create_agent(self, tenant: str, title: str, dsl: Any, description: str | None = None,
                           avatar: str | None = None, canvas_type: str | None = None) -> Agent:
        if await self._title_taken(tenant, title):
            raise StoreError(f"an agent titled {title!r} already exists")
        now = now_ms()
        agent = Agent(id=uuid.uuid4().hex, tenant=tenant, title=title, dsl=dsl, description=description,
                      avatar=avatar, create_time=now, update_time=now, canvas_type=canvas_type)
        try:
            await self.db.execute(
                "INSERT INTO c2g_agents (id, tenant, title, description, avatar, dsl, create_time, update_time, "
                "canvas_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (agent.id, tenant, title, description, avatar, json.dumps(dsl, ensure_ascii=False), now, now,
                 canvas_type))
        except Exception as e:
            if is_integrity_error(e):      # created by a concurrent request meanwhile
                raise StoreError(f"an agent titled {title!r} already exists") from None
            raise
        return agent

    async def _title_taken(self, tenant: str, title: str, other_than: str | None = None) -> bool:
        rows = await self.db.fetchall("SELECT id FROM c2g_agents WHERE tenant = ? AND title = ?", (tenant, title))
        return any(r["id"] != other_than for r in rows)

    async def get_agent(self, tenant: str, agent_id: str) -> Agent | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_agents WHERE tenant = ? AND id = ?", (tenant, agent_id))
        return agent_from_row(rows[0]) if rows else None

    async def find_agent(self, agent_id: str) -> Agent | None:
        """An agent by id, whoever owns it: for its webhook, whose URL is public by design."""
        rows = await self.db.fetchall("SELECT * FROM c2g_agents WHERE id = ?", (agent_id,))
        return agent_from_row(rows[0]) if rows else None

    async def list_agents(self, tenant: str, *, page: int = 1, page_size: int = 30, orderby: str = "update_time",
                          desc: bool = True, agent_id: str | None = None, title: str | None = None,
                          tags: list[str] | None = None, keywords: str | None = None) -> tuple[list[Agent], int]:
        """`tags`: agents with any of them; `keywords`: in the title or the tags (RAGFlow's filters)."""
        where, params = "tenant = ?", [tenant]
        if agent_id:
            where, params = where + " AND id = ?", params + [agent_id]
        if title:
            where, params = where + " AND title = ?", params + [title]
        if tags:
            # wrapped in commas so that tag "ml" does not match "ml-ops"
            where += " AND (" + " OR ".join(["LOWER(',' || tags || ',') LIKE ? ESCAPE '\\'"] * len(tags)) + ")"
            params += [f"%,{like_literal(t.lower())},%" for t in tags]
        if keywords:
            where += " AND (LOWER(title) LIKE ? ESCAPE '\\' OR LOWER(tags) LIKE ? ESCAPE '\\')"
            params += [f"%{like_literal(keywords.lower())}%"] * 2
        total = (await self.db.fetchall(f"SELECT COUNT(*) AS n FROM c2g_agents WHERE {where}", tuple(params)))[0]["n"]
        order = order_by(orderby, desc, default="update_time")
        rows = await self.db.fetchall(f"SELECT * FROM c2g_agents WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
                                      tuple(params) + page_window(page, page_size))
        return [agent_from_row(r) for r in rows], int(total)

    async def update_agent(self, tenant: str, agent_id: str, **changes: Any) -> Agent | None:
        agent = await self.get_agent(tenant, agent_id)
        if agent is None:
            return None
        if "title" in changes and await self._title_taken(tenant, changes["title"], other_than=agent_id):
            raise StoreError(f"an agent titled {changes['title']!r} already exists")
        for key, value in changes.items():
            setattr(agent, key, value)
        agent.update_time = now_ms()
        await self.db.execute(
            "UPDATE c2g_agents SET title = ?, description = ?, avatar = ?, dsl = ?, update_time = ?, "
            "canvas_type = ? WHERE tenant = ? AND id = ?",
            (agent.title, agent.description, agent.avatar, json.dumps(agent.dsl, ensure_ascii=False),
             agent.update_time, agent.canvas_type, tenant, agent_id))
        return agent

    async def delete_agent(self, tenant: str, agent_id: str) -> bool:
        """Delete an agent with its schedules, its sessions and their checkpoints, its versions, its webhook log and
        its A2A tasks."""
        if await self.get_agent(tenant, agent_id) is None:
            return False
        await self.delete_agent_schedules(tenant, agent_id)
        await self.delete_sessions(tenant, await self.agent_session_ids(tenant, agent_id))
        await self.delete_versions_of(tenant, agent_id)
        await self.delete_webhook_log(tenant, agent_id)
        await self.delete_a2a_tasks_of(tenant, agent_id)
        await self.db.execute("DELETE FROM c2g_agents WHERE tenant = ? AND id = ?", (tenant, agent_id))
        return True


    # --- tags ----------------------------------------------------------------------------------
    async def set_tags(self, tenant: str, agent_id: str, tags: Any) -> str | None:
        """Replace an agent's tags (normalized as RAGFlow does); None when the tenant has no such agent."""
        value = normalize_tags(tags)
        changed = await self.db.execute("UPDATE c2g_agents SET tags = ? WHERE tenant = ? AND id = ?",
                                        (value, tenant, agent_id))
        return value if changed else None

    async def tag_counts(self, tenant: str) -> list[tuple[str, int]]:
        """(tag, number of the tenant's agents with it), most used first, then by name."""
        counts: dict[str, int] = {}
        for row in await self.db.fetchall("SELECT tags FROM c2g_agents WHERE tenant = ?", (tenant,)):
            for tag in (row["tags"] or "").split(","):
                if tag.strip():
                    counts[tag.strip()] = counts.get(tag.strip(), 0) + 1
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

"""Agent versions in the store: every saved DSL of an agent, with its diagnostics (see server/backend/versions.py)."""
from __future__ import annotations

import json
import uuid
from typing import Any

from canvas2graph.server.backend.store_records import Version, now_ms, version_from_row

MAX_DRAFT_VERSIONS = 20              # unreleased versions kept per agent (released ones are all kept), as RAGFlow


class VersionTables:
    """`Store`'s agent versions."""

    db: Any

    async def save_version(self, tenant: str, agent_id: str, dsl: Any, *, title: str, diagnostics: dict,
                           created_by: str, released: bool = False, description: str | None = None) -> Version:
        """Keep a saved DSL as a version, as RAGFlow's save_or_replace_latest does.

        A save whose DSL is the latest version's refreshes that version (its time, author and release
        flag) instead of adding a copy, unless the latest is released and this save is not: a released
        version is never changed. At most MAX_DRAFT_VERSIONS unreleased versions are kept.
        """
        text = json.dumps(dsl, ensure_ascii=False, sort_keys=True)
        now = now_ms()
        rows = await self.db.fetchall(
            "SELECT id, dsl, released FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ? "
            "ORDER BY create_time DESC, id DESC LIMIT 1", (tenant, agent_id))
        latest = rows[0] if rows else None
        same = latest is not None and json.dumps(json.loads(latest["dsl"]), ensure_ascii=False, sort_keys=True) == text
        if same and not (latest["released"] and not released):
            await self.db.execute(
                "UPDATE c2g_agent_versions SET update_time = ?, created_by = ?, released = ?, diagnostics = ? "
                "WHERE id = ?", (now, created_by, int(bool(latest["released"]) or released),
                                 json.dumps(diagnostics, ensure_ascii=False), latest["id"]))
            version_id = latest["id"]
        else:
            version_id = uuid.uuid4().hex
            # a version made in the same millisecond as the last one still sorts after it
            newest = await self.db.fetchall("SELECT MAX(create_time) AS t FROM c2g_agent_versions "
                                            "WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
            created = max(now, int(newest[0]["t"] or 0) + 1)
            await self.db.execute(
                "INSERT INTO c2g_agent_versions (id, tenant, agent_id, title, description, released, dsl, diagnostics, "
                "created_by, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (version_id, tenant, agent_id, title, description, int(released), json.dumps(dsl, ensure_ascii=False),
                 json.dumps(diagnostics, ensure_ascii=False), created_by, created, created))
            await self._prune_versions(tenant, agent_id)
        version = await self.get_version(tenant, agent_id, version_id)
        assert version is not None
        return version

    async def _prune_versions(self, tenant: str, agent_id: str) -> None:
        drafts = await self.db.fetchall(
            "SELECT id FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ? AND released = 0 "
            "ORDER BY create_time DESC, id DESC", (tenant, agent_id))
        for row in drafts[MAX_DRAFT_VERSIONS:]:
            await self.db.execute("DELETE FROM c2g_agent_versions WHERE id = ?", (row["id"],))

    async def delete_versions_of(self, tenant: str, agent_id: str) -> None:
        await self.db.execute("DELETE FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))

    async def list_versions(self, tenant: str, agent_id: str) -> list[Version]:
        """An agent's versions, the most recently saved first, without their DSLs."""
        rows = await self.db.fetchall(
            "SELECT id, tenant, agent_id, title, released, created_by, create_time, update_time FROM c2g_agent_versions "
            "WHERE tenant = ? AND agent_id = ? ORDER BY update_time DESC, create_time DESC", (tenant, agent_id))
        return [version_from_row(r) for r in rows]

    async def get_version(self, tenant: str, agent_id: str, version_id: str) -> Version | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ? AND id = ?",
                                      (tenant, agent_id, version_id))
        return version_from_row(rows[0]) if rows else None

    async def latest_version(self, tenant: str, agent_id: str, *, released: bool = False) -> Version | None:
        """The newest version (the newest released one with `released`), with its DSL."""
        where = " AND released = 1" if released else ""
        rows = await self.db.fetchall(f"SELECT * FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ?{where} "
                                      "ORDER BY create_time DESC, id DESC LIMIT 1", (tenant, agent_id))
        return version_from_row(rows[0]) if rows else None

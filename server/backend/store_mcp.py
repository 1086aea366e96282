"""MCP sessions in the store, so that every server process can serve every MCP session.

An MCP client opens a session with `initialize` on one process and may send its next requests to any
other (a load balancer without session affinity). What a session is lives here:
- `c2g_mcp_sessions`: its tenant, the protocol version and client parameters (capabilities) its
  `initialize` settled, and when it was last seen (sessions idle longer than a TTL are deleted);
- `c2g_mcp_conversations`: per (MCP session, agent), the canvas2graph session its calls continue, the form
  a paused turn waits for, and the call running on it (its JSON-RPC id, the process that runs it, whether
  it waits for an elicitation answer): what another process needs to pass on a cancellation or an answer;
- `c2g_mcp_replies`: a client's answer to a server request (an elicitation) that reached another process
  than the one waiting for it, kept until that process takes it.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any

REPLIES_KEPT_SECONDS = 600.0        # an answer nobody took (its call ended) is dropped by the next sweep


class McpTables:
    """`Store`'s MCP sessions, their conversations with agents, and answers passed between processes."""

    db: Any

    # --- sessions -------------------------------------------------------------------------------
    async def create_mcp_session(self, mcp_session: str, tenant: str, protocol_version: str,
                                 client: dict[str, Any]) -> None:
        """Record a session its `initialize` opened: `client` is the initialize request's params."""
        now = time.time()
        await self.db.execute("INSERT INTO c2g_mcp_sessions (id, tenant, protocol_version, client, created_at, "
                              "seen_at) VALUES (?, ?, ?, ?, ?, ?)",
                              (mcp_session, tenant, protocol_version, json.dumps(client, ensure_ascii=False), now, now))

    async def get_mcp_session(self, mcp_session: str) -> dict[str, Any] | None:
        """`{id, tenant, protocol_version, client, seen_at}`, or None for a session that is unknown or gone."""
        rows = await self.db.fetchall("SELECT id, tenant, protocol_version, client, seen_at FROM c2g_mcp_sessions "
                                      "WHERE id = ?", (mcp_session,))
        if not rows:
            return None
        return {**rows[0], "client": json.loads(rows[0]["client"])}

    async def touch_mcp_session(self, mcp_session: str) -> None:
        await self.db.execute("UPDATE c2g_mcp_sessions SET seen_at = ? WHERE id = ?", (time.time(), mcp_session))

    async def delete_mcp_session(self, mcp_session: str) -> None:
        """Forget a session the client ended, with its conversations (their canvas2graph sessions stay)."""
        for table, column in (("c2g_mcp_replies", "mcp_session"), ("c2g_mcp_conversations", "mcp_session"),
                              ("c2g_mcp_sessions", "id")):
            await self.db.execute(f"DELETE FROM {table} WHERE {column} = ?", (mcp_session,))

    async def expire_mcp_sessions(self, seen_before: float) -> int:
        """Delete the sessions last seen before `seen_before` (with their conversations and answers) and
        answers older than REPLIES_KEPT_SECONDS; returns how many sessions went."""
        idle = "SELECT id FROM c2g_mcp_sessions WHERE seen_at < ?"
        await self.db.execute(f"DELETE FROM c2g_mcp_replies WHERE mcp_session IN ({idle}) OR created_at < ?",
                              (seen_before, time.time() - REPLIES_KEPT_SECONDS))
        await self.db.execute(f"DELETE FROM c2g_mcp_conversations WHERE mcp_session IN ({idle})", (seen_before,))
        return await self.db.execute("DELETE FROM c2g_mcp_sessions WHERE seen_at < ?", (seen_before,))

    # --- conversations --------------------------------------------------------------------------
    async def get_mcp_conversation(self, mcp_session: str, agent_id: str) -> dict[str, Any] | None:
        """`{session_id, pause}`: the canvas2graph session the MCP session talks to the agent in, and the
        form its last turn left waiting (None when it did not pause)."""
        rows = await self.db.fetchall("SELECT session_id, pause FROM c2g_mcp_conversations "
                                      "WHERE mcp_session = ? AND agent_id = ?", (mcp_session, agent_id))
        if not rows:
            return None
        pause = rows[0]["pause"]
        return {"session_id": rows[0]["session_id"], "pause": json.loads(pause) if pause else None}

    async def put_mcp_conversation(self, mcp_session: str, agent_id: str, session_id: str, pause: dict | None,
                                   call_id: str | None = None, call_owner: str | None = None) -> None:
        """Which session the MCP session continues with the agent, the form it waits for, and the call
        running on it (`call_id` None: no call runs)."""
        await self.db.execute(
            "INSERT INTO c2g_mcp_conversations (mcp_session, agent_id, session_id, pause, call_id, call_owner, asking) "
            "VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (mcp_session, agent_id) DO UPDATE SET "
            "session_id = excluded.session_id, pause = excluded.pause, call_id = excluded.call_id, "
            "call_owner = excluded.call_owner, asking = 0",
            (mcp_session, agent_id, session_id, json.dumps(pause, ensure_ascii=False) if pause is not None else None,
             call_id, call_owner))

    async def set_mcp_asking(self, mcp_session: str, agent_id: str, asking: bool) -> None:
        """Mark the agent's running call as waiting (or no longer) for the client's answer to an elicitation."""
        await self.db.execute("UPDATE c2g_mcp_conversations SET asking = ? WHERE mcp_session = ? AND agent_id = ?",
                              (int(asking), mcp_session, agent_id))

    async def mcp_call(self, mcp_session: str, call_id: str) -> dict[str, Any] | None:
        """`{session_id, call_owner}` of the call `call_id` running in the MCP session, or None."""
        rows = await self.db.fetchall("SELECT session_id, call_owner FROM c2g_mcp_conversations "
                                      "WHERE mcp_session = ? AND call_id = ?", (mcp_session, call_id))
        return rows[0] if rows else None

    async def mcp_askers(self, mcp_session: str) -> set[str]:
        """The processes running a call of the MCP session that waits for an elicitation answer."""
        rows = await self.db.fetchall("SELECT call_owner FROM c2g_mcp_conversations "
                                      "WHERE mcp_session = ? AND asking = 1 AND call_owner IS NOT NULL", (mcp_session,))
        return {r["call_owner"] for r in rows}

    # --- answers passed between processes -------------------------------------------------------
    async def add_mcp_reply(self, mcp_session: str, owner: str, message: str) -> None:
        """Keep a client's JSON-RPC response (its text) for the process `owner`, which waits for it."""
        await self.db.execute("INSERT INTO c2g_mcp_replies (id, mcp_session, owner, message, created_at) "
                              "VALUES (?, ?, ?, ?, ?)", (uuid.uuid4().hex, mcp_session, owner, message, time.time()))

    async def take_mcp_replies(self, mcp_session: str, owner: str) -> list[str]:
        """The responses kept for `owner` in the MCP session, oldest first, deleted as they are taken."""
        rows = await self.db.fetchall("SELECT id, message FROM c2g_mcp_replies WHERE mcp_session = ? AND owner = ? "
                                      "ORDER BY created_at", (mcp_session, owner))
        taken = []
        for row in rows:        # a row another taker deleted first is not taken twice
            if await self.db.execute("DELETE FROM c2g_mcp_replies WHERE id = ?", (row["id"],)):
                taken.append(row["message"])
        return taken

"""Sessions in the store: the DSL (and agent version) a session runs, and its message log."""
from __future__ import annotations

import json
import uuid
from typing import Any

from canvas2graph.server.backend.store_records import Session, StoreError, Version, now_ms, session_from_row
from canvas2graph.server.backend.store_sql import is_integrity_error, like_literal, order_by, page_window


class SessionTables:
    """`Store`'s sessions; deleting one deletes its checkpoints too (runtime/run/lifecycle.py)."""

    db: Any
    checkpointer: Any

    async def create_session(self, tenant: str, *, source: str, dsl: Any, agent_id: str | None = None,
                             name: str = "", user_id: str = "", messages: list | None = None,
                             session_id: str | None = None, version: Version | None = None) -> Session:
        """A session runs `dsl` for its whole life; `version` names the agent version that DSL is."""
        now = now_ms()
        dsl_text = dsl if isinstance(dsl, str) else json.dumps(dsl, ensure_ascii=False)
        session = Session(id=session_id or uuid.uuid4().hex, tenant=tenant, agent_id=agent_id, source=source,
                          dsl=json.loads(dsl_text), dsl_text=dsl_text, name=name, user_id=user_id,
                          messages=list(messages or []), create_time=now, update_time=now,
                          version_id=version.id if version else None, version_title=version.title if version else None)
        try:
            await self.db.execute(
                "INSERT INTO c2g_sessions (id, tenant, agent_id, source, name, user_id, dsl, messages, reference, "
                "create_time, update_time, version_id, version_title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session.id, tenant, agent_id, source, name, user_id, dsl_text,
                 json.dumps(session.messages, ensure_ascii=False), "[]", now, now, session.version_id,
                 session.version_title))
        except Exception as e:
            if is_integrity_error(e):
                raise StoreError(f"session id {session.id} is not available: choose another") from None
            raise
        return session

    async def agent_session_ids(self, tenant: str, agent_id: str) -> list[str]:
        rows = await self.db.fetchall("SELECT id FROM c2g_sessions WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
        return [r["id"] for r in rows]

    async def session_exists(self, session_id: str) -> bool:
        """Whether any tenant has a session with this id (ids chosen by clients must not collide)."""
        return bool(await self.db.fetchall("SELECT id FROM c2g_sessions WHERE id = ?", (session_id,)))

    async def get_session(self, tenant: str, session_id: str) -> Session | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_sessions WHERE tenant = ? AND id = ?", (tenant, session_id))
        return session_from_row(rows[0]) if rows else None

    async def list_sessions(self, tenant: str, agent_id: str, *, page: int = 1, page_size: int = 30,
                            orderby: str = "update_time", desc: bool = True, session_id: str | None = None,
                            user_id: str | None = None, with_dsl: bool = True) -> list[Session]:
        where, params = "tenant = ? AND agent_id = ?", [tenant, agent_id]
        if session_id:
            where, params = where + " AND id = ?", params + [session_id]
        if user_id:
            where, params = where + " AND user_id = ?", params + [user_id]
        columns = "*" if with_dsl else ("id, tenant, agent_id, source, name, user_id, messages, reference, "
                                        "create_time, update_time, version_id, version_title")
        order = order_by(orderby, desc, default="update_time")
        rows = await self.db.fetchall(f"SELECT {columns} FROM c2g_sessions WHERE {where} ORDER BY {order} "
                                      "LIMIT ? OFFSET ?", tuple(params) + page_window(page, page_size))
        return [session_from_row(r, with_dsl) for r in rows]

    async def session_dsl(self, session_id: str) -> str | None:
        """The DSL a session runs, whoever's it is (for the operator's `canvas2graph trace`)."""
        rows = await self.db.fetchall("SELECT dsl FROM c2g_sessions WHERE id = ?", (session_id,))
        return rows[0]["dsl"] if rows else None

    async def find_session_of_message(self, tenant: str, agent_id: str | None, message_id: str) -> Session | None:
        """The tenant's session (of `agent_id`, if given) whose message log has a message with this id."""
        if not message_id:
            return None
        where, params = "tenant = ? AND messages LIKE ? ESCAPE '\\'", [tenant, f'%"id": {like_literal(json.dumps(message_id))}%']
        if agent_id:
            where, params = where + " AND agent_id = ?", params + [agent_id]
        rows = await self.db.fetchall(f"SELECT * FROM c2g_sessions WHERE {where} ORDER BY update_time DESC LIMIT 20",
                                      tuple(params))
        for row in rows:            # the pattern may match inside a message's text: check the ids
            session = session_from_row(row)
            if any(isinstance(m, dict) and m.get("id") == message_id for m in session.messages):
                return session
        return None

    async def delete_sessions(self, tenant: str, session_ids: list[str]) -> list[str]:
        """Delete the tenant's sessions among `session_ids` (their rows, checkpoints and pending writes);
        returns those deleted. Many at once go in batches that let the server answer meanwhile
        (runtime/run/lifecycle.py)."""
        import asyncio

        from canvas2graph.runtime.run.lifecycle import BATCH, delete_sessions
        ids, owned = list(dict.fromkeys(session_ids)), []
        for i in range(0, len(ids), BATCH):
            batch = ids[i:i + BATCH]
            marks = ", ".join("?" * len(batch))
            rows = await self.db.fetchall(f"SELECT id FROM c2g_sessions WHERE tenant = ? AND id IN ({marks})",
                                          (tenant, *batch))
            owned += [sid for sid in batch if sid in {r["id"] for r in rows}]
            await asyncio.sleep(0)
        if self.checkpointer is None:
            for i in range(0, len(owned), BATCH):
                await self.db.execute(f"DELETE FROM c2g_sessions WHERE id IN ({', '.join('?' * len(owned[i:i + BATCH]))})",
                                      tuple(owned[i:i + BATCH]))
            return owned
        await delete_sessions(self, owned)
        return owned

    async def append_messages(self, session_id: str, messages: list[dict], reference: dict | None = None) -> bool:
        """Add to a session's message log; False when the session was deleted meanwhile. A message whose id
        and role the log has already is left out (a turn taken over by another worker logs each once), and
        so is the reference with it. Only the lease holder calls this, so read-then-write is safe."""
        rows = await self.db.fetchall("SELECT messages, reference FROM c2g_sessions WHERE id = ?", (session_id,))
        if not rows:
            return False
        log = json.loads(rows[0]["messages"])
        seen = {(m.get("id"), m.get("role")) for m in log if isinstance(m, dict) and m.get("id")}
        new = [m for m in messages if not m.get("id") or (m["id"], m.get("role")) not in seen]
        if not new:
            return True
        log += new
        refs = json.loads(rows[0]["reference"])
        if reference is not None:
            refs.append(reference)
        await self.db.execute("UPDATE c2g_sessions SET messages = ?, reference = ?, update_time = ? WHERE id = ?",
                              (json.dumps(log, ensure_ascii=False, default=str),
                               json.dumps(refs, ensure_ascii=False, default=str), now_ms(), session_id))
        return True

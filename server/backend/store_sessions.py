"""Sessions in the store: the DSL (and agent version) a session runs, and its message log.

The log is `c2g_session_messages`, a row per message (with the reference of an answer): logging a message costs
the same at a session's thousandth turn as at its first. The session row's `messages` and `reference` hold
what the session was created with (an agent's prologue) and, in a database of an earlier version, the log
as it was then; a session's messages are those, then the table's, in order."""
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

    async def get_session(self, tenant: str, session_id: str, *, with_messages: bool = False) -> Session | None:
        """The tenant's session; with its logged messages only when asked (`with_messages`): running a turn or
        checking who owns a session needs the DSL, and reading the log would cost more at each turn of a long
        conversation. (`messages` then holds only what the session was created with.)"""
        rows = await self.db.fetchall("SELECT * FROM c2g_sessions WHERE tenant = ? AND id = ?", (tenant, session_id))
        if not rows:
            return None
        session = session_from_row(rows[0])
        if with_messages:
            await self._add_logged([session])
        return session

    async def _add_logged(self, sessions: list[Session]) -> None:
        """Add to each session the messages (and references) its log table holds, in order."""
        if not sessions:
            return
        by_id = {session.id: session for session in sessions}
        marks = ", ".join("?" * len(by_id))
        rows = await self.db.fetchall(f"SELECT session_id, message, reference FROM c2g_session_messages "
                                      f"WHERE session_id IN ({marks}) ORDER BY session_id, seq", tuple(by_id))
        for row in rows:
            session = by_id[row["session_id"]]
            session.messages.append(json.loads(row["message"]))
            if row["reference"] is not None:
                session.reference.append(json.loads(row["reference"]))

    async def list_sessions(self, tenant: str, agent_id: str, *, page: int = 1, page_size: int = 30,
                            orderby: str = "update_time", desc: bool = True, session_id: str | None = None,
                            user_id: str | None = None, with_dsl: bool = True,
                            with_messages: bool = True) -> list[Session]:
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
        sessions = [session_from_row(r, with_dsl) for r in rows]
        if with_messages:
            await self._add_logged(sessions)
        return sessions

    async def session_dsl(self, session_id: str) -> str | None:
        """The DSL a session runs, whoever's it is (for the operator's `canvas2graph trace`)."""
        rows = await self.db.fetchall("SELECT dsl FROM c2g_sessions WHERE id = ?", (session_id,))
        return rows[0]["dsl"] if rows else None

    async def find_session_of_message(self, tenant: str, agent_id: str | None, message_id: str) -> Session | None:
        """The tenant's session (of `agent_id`, if given) whose message log has a message with this id."""
        if not message_id:
            return None
        agent = " AND s.agent_id = ?" if agent_id else ""
        rows = await self.db.fetchall(
            "SELECT s.id FROM c2g_session_messages m JOIN c2g_sessions s ON s.id = m.session_id "
            f"WHERE m.message_id = ? AND s.tenant = ?{agent} ORDER BY s.update_time DESC LIMIT 1",
            (message_id, tenant, *([agent_id] if agent_id else [])))
        if rows:
            return await self.get_session(tenant, rows[0]["id"])
        # a log written by an earlier version, in the session row
        where, params = "tenant = ? AND messages LIKE ? ESCAPE '\\'", [tenant, f'%"id": {like_literal(json.dumps(message_id))}%']
        if agent_id:
            where, params = where + " AND agent_id = ?", params + [agent_id]
        rows = await self.db.fetchall(f"SELECT id, messages FROM c2g_sessions WHERE {where} ORDER BY update_time DESC "
                                      "LIMIT 20", tuple(params))
        for row in rows:            # the pattern may match inside a message's text: check the ids
            if any(isinstance(m, dict) and m.get("id") == message_id for m in json.loads(row["messages"])):
                return await self.get_session(tenant, row["id"])
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
                marks = ", ".join("?" * len(owned[i:i + BATCH]))
                await self.db.execute(f"DELETE FROM c2g_sessions WHERE id IN ({marks})", tuple(owned[i:i + BATCH]))
                await self.db.execute(f"DELETE FROM c2g_session_messages WHERE session_id IN ({marks})",
                                      tuple(owned[i:i + BATCH]))
            return owned
        await delete_sessions(self, owned)
        return owned

    async def append_messages(self, session_id: str, messages: list[dict], reference: dict | None = None) -> bool:
        """Add to a session's message log; False when the session was deleted meanwhile. A message whose id
        and role the log has already is left out (a turn taken over by another worker logs each once), and
        so is the reference with it (it goes with the last message)."""
        if not await self.db.execute("UPDATE c2g_sessions SET update_time = ? WHERE id = ?", (now_ms(), session_id)):
            return False
        for i, message in enumerate(messages):
            ref = reference if reference is not None and i == len(messages) - 1 else None
            await self._log_one(session_id, message, ref)
        return True

    async def _log_one(self, session_id: str, message: dict, reference: dict | None) -> None:
        """One message at the end of the log; nothing when its id and role are logged already. Two writers at once
        (a worker thought dead, still finishing) take the same position: the second reads the end again."""
        values = (message.get("id") or None, message.get("role"), json.dumps(message, ensure_ascii=False, default=str),
                  None if reference is None else json.dumps(reference, ensure_ascii=False, default=str))
        for attempt in range(5):
            try:
                await self.db.execute(
                    "INSERT INTO c2g_session_messages (session_id, seq, message_id, role, message, reference) "
                    "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM c2g_session_messages WHERE session_id = ? "
                    "ON CONFLICT (session_id, message_id, role) DO NOTHING",
                    (session_id, *values, session_id))
                return
            except Exception as e:
                if not is_integrity_error(e) or attempt == 4:
                    raise

    async def drop_logged_message(self, session_id: str, message_id: str) -> None:
        """Take a message out of a session's log, whatever its role (a turn rolled back)."""
        await self.db.execute("DELETE FROM c2g_session_messages WHERE session_id = ? AND message_id = ?",
                              (session_id, message_id))
        rows = await self.db.fetchall("SELECT messages FROM c2g_sessions WHERE id = ?", (session_id,))
        if rows:                        # a log an earlier version wrote in the session row
            logged = json.loads(rows[0]["messages"])
            kept = [m for m in logged if not (isinstance(m, dict) and m.get("id") == message_id)]
            if len(kept) != len(logged):
                await self.db.execute("UPDATE c2g_sessions SET messages = ? WHERE id = ?",
                                      (json.dumps(kept, ensure_ascii=False, default=str), session_id))

"""Webhook calls in the store: each request a webhook received, its run's events, and the rate-limit
buckets webhooks take their requests from."""
from __future__ import annotations

import json
import time
from typing import Any

from canvas2graph.server.backend.store_records import WebhookCall, webhook_call_from_row

WEBHOOK_CALLS_KEPT = 100             # calls (and their events) kept per agent for /webhook/logs


def webhook_bucket(agent_id: str) -> str:
    return f"webhook:{agent_id}"


class WebhookTables:
    """`Store`'s webhook calls, their events, and token buckets."""

    db: Any

    async def add_webhook_call(self, call: WebhookCall) -> None:
        """Record a call (and forget the agent's oldest beyond WEBHOOK_CALLS_KEPT)."""
        await self.db.execute(
            "INSERT INTO c2g_webhook_calls (id, tenant, agent_id, session_id, is_test, mode, method, client, status, "
            "http_status, error, request, owner, start_ts, end_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (call.id, call.tenant, call.agent_id, call.session_id, int(call.is_test), call.mode, call.method,
             call.client, call.status, call.http_status, call.error, json.dumps(call.request, ensure_ascii=False,
                                                                                 default=str),
             call.owner, call.start_ts, call.end_ts))
        old = await self.db.fetchall(
            "SELECT id FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ? ORDER BY start_ts DESC, id DESC",
            (call.tenant, call.agent_id))
        for row in old[WEBHOOK_CALLS_KEPT:]:
            await self.db.execute("DELETE FROM c2g_webhook_events WHERE call_id = ?", (row["id"],))
            await self.db.execute("DELETE FROM c2g_webhook_calls WHERE id = ?", (row["id"],))

    async def delete_webhook_log(self, tenant: str, agent_id: str) -> None:
        """Forget an agent's webhook calls, their events and its rate-limit bucket."""
        await self.db.execute("DELETE FROM c2g_webhook_events WHERE call_id IN "
                              "(SELECT id FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ?)", (tenant, agent_id))
        await self.db.execute("DELETE FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
        await self.db.execute("DELETE FROM c2g_rate_buckets WHERE bucket = ?", (webhook_bucket(agent_id),))

    async def update_webhook_call(self, call_id: str, **fields: Any) -> None:
        allowed = {"status", "http_status", "error", "end_ts", "session_id", "owner"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"cannot update webhook call fields {sorted(set(fields) - allowed)}")
        assignments = ", ".join(f"{name} = ?" for name in fields)
        await self.db.execute(f"UPDATE c2g_webhook_calls SET {assignments} WHERE id = ?",
                              (*fields.values(), call_id))

    async def add_webhook_events(self, call_id: str, first_seq: int, events: list[tuple[float, dict]]) -> None:
        """Append (ts, event) pairs to a call's trace, numbered from `first_seq`."""
        for i, (ts, event) in enumerate(events):
            await self.db.execute("INSERT INTO c2g_webhook_events (call_id, seq, ts, event) VALUES (?, ?, ?, ?)",
                                  (call_id, first_seq + i, ts, json.dumps(event, ensure_ascii=False, default=str)))

    async def webhook_events(self, call_id: str, since_ts: float) -> list[dict]:
        rows = await self.db.fetchall("SELECT ts, event FROM c2g_webhook_events WHERE call_id = ? AND ts > ? "
                                      "ORDER BY seq", (call_id, since_ts))
        return [{"ts": r["ts"], **json.loads(r["event"])} for r in rows]

    async def next_event_seq(self, call_id: str) -> int:
        rows = await self.db.fetchall("SELECT MAX(seq) AS n FROM c2g_webhook_events WHERE call_id = ?", (call_id,))
        return int(rows[0]["n"]) + 1 if rows and rows[0]["n"] is not None else 0

    async def webhook_calls(self, tenant: str, agent_id: str, *, limit: int = 20, is_test: bool | None = None,
                            after_ts: float | None = None, oldest_first: bool = False) -> list[WebhookCall]:
        where, params = "tenant = ? AND agent_id = ?", [tenant, agent_id]
        if is_test is not None:
            where, params = where + " AND is_test = ?", params + [int(is_test)]
        if after_ts is not None:
            where, params = where + " AND start_ts > ?", params + [after_ts]
        order = "ASC" if oldest_first else "DESC"
        rows = await self.db.fetchall(f"SELECT * FROM c2g_webhook_calls WHERE {where} ORDER BY start_ts {order} "
                                      "LIMIT ?", (*params, max(1, min(int(limit), WEBHOOK_CALLS_KEPT))))
        return [webhook_call_from_row(r) for r in rows]

    async def webhook_call(self, tenant: str, agent_id: str, call_id: str) -> WebhookCall | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ? AND id = ?",
                                      (tenant, agent_id, call_id))
        return webhook_call_from_row(rows[0]) if rows else None

    async def running_webhook_calls(self) -> list[WebhookCall]:
        """Calls of every tenant whose run has not ended (or whose process died before saying so)."""
        rows = await self.db.fetchall("SELECT * FROM c2g_webhook_calls WHERE status = 'running' ORDER BY start_ts")
        return [webhook_call_from_row(r) for r in rows]


    # --- rate limits ---------------------------------------------------------------------------
    async def take_token(self, bucket: str, capacity: float, per_seconds: float) -> bool:
        """Take one token from a token bucket that holds `capacity` and refills `capacity` per
        `per_seconds`; False when it is empty. One statement decides, so concurrent requests (and
        servers sharing a database) never take the same token twice."""
        now, rate = time.time(), capacity / per_seconds
        # time since the last take, never below 0: concurrent requests read the clock in one order and reach the
        # database in another, and a request that read it earlier must not take back what a later one refilled
        elapsed = "(CASE WHEN ? > ts THEN ? - ts ELSE 0 END)"
        level = f"(CASE WHEN tokens + {elapsed} * ? > ? THEN ? ELSE tokens + {elapsed} * ? END)"
        level_params = (now, now, rate, capacity, capacity, now, now, rate)
        for _ in range(2):
            if await self.db.execute(f"UPDATE c2g_rate_buckets SET tokens = {level} - 1, "
                                     "ts = CASE WHEN ? > ts THEN ? ELSE ts END "
                                     f"WHERE bucket = ? AND {level} >= 1",
                                     (*level_params, now, now, bucket, *level_params)):
                return True
            if await self.db.fetchall("SELECT bucket FROM c2g_rate_buckets WHERE bucket = ?", (bucket,)):
                return False
            if await self.db.execute("INSERT INTO c2g_rate_buckets (bucket, tokens, ts) VALUES (?, ?, ?) "
                                     "ON CONFLICT (bucket) DO NOTHING", (bucket, capacity - 1, now)):
                return True
        return False

"""Session leases in the store: which server process runs a turn on a session, and requests to cancel it.

A lease names its owner (`host:pid:instance`) and expires unless renewed; a lease whose owner is a
dead process on this host is taken over at once, so a killed server's sessions resume immediately
after a restart.
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any

LEASE_SECONDS = 20.0                 # a running turn renews its lease well before this


def process_owner() -> str:
    """This process as a lease owner: host, pid and a per-process instance id."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_owner_is_dead(owner: str) -> bool:
    """True when `owner` names a process on this host that no longer runs."""
    try:
        host, pid, _ = owner.rsplit(":", 2)
        pid_n = int(pid)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False            # another machine: only the lease's expiry tells
    if pid_n == os.getpid():
        return False
    try:
        os.kill(pid_n, 0)
    except ProcessLookupError:
        return True
    except PermissionError:     # it exists, owned by someone else
        return False
    return False


class LeaseTables:
    """`Store`'s leases on sessions and the cancellation flags that travel with them."""

    db: Any

    async def acquire_lease(self, session_id: str, owner: str, seconds: float = LEASE_SECONDS) -> bool:
        """Take the session for one turn; False when another live turn holds it."""
        now = time.time()
        taken = await self.db.execute(
            "UPDATE c2g_sessions SET lease_owner = ?, lease_until = ?, cancel_requested = 0 "
            "WHERE id = ? AND (lease_owner IS NULL OR lease_until < ?)", (owner, now + seconds, session_id, now))
        if taken:
            return True
        rows = await self.db.fetchall("SELECT lease_owner FROM c2g_sessions WHERE id = ?", (session_id,))
        holder = rows[0]["lease_owner"] if rows else None
        if holder and lease_owner_is_dead(holder):
            # compare-and-set on the dead owner: of two processes taking over, one wins
            return bool(await self.db.execute(
                "UPDATE c2g_sessions SET lease_owner = ?, lease_until = ?, cancel_requested = 0 "
                "WHERE id = ? AND lease_owner = ?", (owner, now + seconds, session_id, holder)))
        return False

    async def renew_leases(self, owner: str, session_ids: list[str], seconds: float = LEASE_SECONDS) -> None:
        if session_ids:
            marks = ", ".join("?" * len(session_ids))
            await self.db.execute(f"UPDATE c2g_sessions SET lease_until = ? WHERE lease_owner = ? AND id IN ({marks})",
                                  (time.time() + seconds, owner, *session_ids))

    async def release_lease(self, session_id: str, owner: str) -> None:
        await self.db.execute("UPDATE c2g_sessions SET lease_owner = NULL, lease_until = NULL, cancel_requested = 0 "
                              "WHERE id = ? AND lease_owner = ?", (session_id, owner))

    async def request_cancel(self, tenant: str, session_id: str) -> bool:
        """Flag the session's running turn for cancellation; False when no turn is running."""
        return bool(await self.db.execute(
            "UPDATE c2g_sessions SET cancel_requested = 1 WHERE tenant = ? AND id = ? "
            "AND lease_owner IS NOT NULL AND lease_until >= ?", (tenant, session_id, time.time())))

    async def cancel_requests(self, owner: str) -> list[str]:
        """Sessions whose turns this owner runs and someone asked to cancel."""
        rows = await self.db.fetchall("SELECT id FROM c2g_sessions WHERE lease_owner = ? AND cancel_requested = 1",
                                      (owner,))
        return [r["id"] for r in rows]

    async def lease_is_live(self, session_id: str) -> bool:
        """Whether a live process holds the session's lease (it is running a turn on it)."""
        rows = await self.db.fetchall("SELECT lease_owner, lease_until FROM c2g_sessions WHERE id = ?", (session_id,))
        if not rows or not rows[0]["lease_owner"]:
            return False
        return rows[0]["lease_until"] >= time.time() and not lease_owner_is_dead(rows[0]["lease_owner"])

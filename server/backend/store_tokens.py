"""Tenants' API tokens in the store: only a token's SHA-256 is kept, so a token is shown once, when made."""
from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from canvas2graph.server.backend.store_records import StoreError

TOKEN_PREFIX = "c2g-"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenTables:
    """`Store`'s tokens: one tenant per token; revoked tokens stay listed."""

    db: Any

    async def create_token(self, tenant: str) -> tuple[str, str]:
        """A new token for `tenant`: (token id, token). Only its hash is stored: show it once."""
        if not tenant or not tenant.strip():
            raise StoreError("a tenant name is required")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = "tok_" + secrets.token_hex(6)
        await self.db.execute("INSERT INTO c2g_tokens (id, secret_hash, tenant, created_at) VALUES (?, ?, ?, ?)",
                              (token_id, _hash(token), tenant.strip(), time.time()))
        return token_id, token

    async def list_tokens(self, tenant: str | None = None) -> list[dict]:
        sql = "SELECT id, tenant, created_at, revoked_at FROM c2g_tokens"
        params: tuple = ()
        if tenant:
            sql, params = sql + " WHERE tenant = ?", (tenant,)
        return await self.db.fetchall(sql + " ORDER BY created_at", params)

    async def revoke_token(self, token_or_id: str, tenant: str | None = None) -> bool:
        """Revoke by token id or by the token itself; False when no live token matches."""
        sql = "UPDATE c2g_tokens SET revoked_at = ? WHERE (id = ? OR secret_hash = ?) AND revoked_at IS NULL"
        params: tuple = (time.time(), token_or_id, _hash(token_or_id))
        if tenant:
            sql, params = sql + " AND tenant = ?", params + (tenant,)
        return await self.db.execute(sql, params) > 0

    async def tenant_of(self, token: str) -> str | None:
        rows = await self.db.fetchall("SELECT tenant FROM c2g_tokens WHERE secret_hash = ? AND revoked_at IS NULL",
                                      (_hash(token),))
        return rows[0]["tenant"] if rows else None

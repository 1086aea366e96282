"""What the route modules share: the request's store, its agent (owned by the token's tenant), a DSL from
a request body, and whole-number query parameters."""
from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from canvas2graph.compiler.dsl.load import fill_default_llm
from canvas2graph.server.errors import argument_error, not_found


def store(request: Request):
    return request.app.state.store


def parse_dsl(value: Any, request: Request) -> dict:
    """A DSL given as an object or as its JSON text; anything else is the caller's mistake. The
    server's default model (`--default-llm`) is filled in where the DSL leaves `llm_id` empty, so
    what is stored is what runs."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise argument_error(f"`dsl` is a string but not JSON: {e}")
        except RecursionError:
            raise argument_error("`dsl` is a string holding JSON that nests too deeply (a DSL nests at most 200 levels)")
    if not isinstance(value, dict):
        raise argument_error(f"`dsl` must be a JSON object, not {type(value).__name__}")
    default_llm = getattr(request.app.state, "default_llm", None)
    return fill_default_llm(value, default_llm) if default_llm else value


def int_param(value: str | None, name: str, default: int, lowest: int = -1_000_000, highest: int = 1_000_000) -> int:
    """A whole-number query parameter within [lowest, highest]: the database counts in 64 bits, and the
    store clamps pages and page sizes to what exists (page 0 is the first, as RAGFlow's)."""
    if value in (None, ""):
        return default
    try:
        number = int(value) if len(value) <= 20 else None
    except ValueError:
        number = None
    if number is None:
        raise argument_error(f"`{name}` must be an integer, got {value[:40]!r}")
    if not lowest <= number <= highest:
        raise argument_error(f"`{name}` must be from {lowest} to {highest:,}, got {number}")
    return number


async def owned_agent(request: Request, tenant_id: str, agent_id: str):
    agent = await store(request).get_agent(tenant_id, agent_id)
    if agent is None:
        raise not_found(f"agent {agent_id}")
    return agent

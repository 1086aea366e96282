"""`canvas2graph memory list|create|show|search|delete`: the memories agents remember with (issue 35).

    canvas2graph memory list [--tenant T] [--db ...] [--format text|json]
    canvas2graph memory create NAME [--type raw,semantic] [--llm-id M@F] [--embd-id M@F] [--tenant T] [--db ...]
    canvas2graph memory show ID [--limit N] [--db ...]
    canvas2graph memory search ID QUERY [--top-n N] [--user-id U] [--db ...]
    canvas2graph memory delete ID... [--db ...]

The store is the one `serve` and `run` use for the sessions database `--db` (runtime/services/memory/stores.py).
`run` keeps its memories under the empty tenant; a server's memories are its tenants' (`--tenant`); `show`,
`search` and `delete` find a memory's tenant by its id.
"""
from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from canvas2graph.cli.parser import add_db
from canvas2graph.types import UsageError


def register(sub) -> None:
    m = sub.add_parser("memory", help="list, create, show, search or delete the memories agents save to")
    msub = m.add_subparsers(dest="memory_command", required=True, metavar="ACTION",
                            help="list, create, show, search or delete")
    ml = msub.add_parser("list", help="every memory: id, tenant, name, kinds, messages and bytes")
    ml.add_argument("--tenant", help="only this tenant's memories")
    ml.add_argument("--format", choices=["text", "json"], default="text", help="text (default) or JSON")
    mc = msub.add_parser("create", help="a new memory (for `run`: the empty tenant's)")
    mc.add_argument("name")
    mc.add_argument("--type", default="raw", help="kinds kept, comma-separated: raw, semantic, episodic, procedural")
    mc.add_argument("--llm-id", default="", help="the chat model that extracts typed memories")
    mc.add_argument("--embd-id", default="", help="the embedding model (none: searches rank by text)")
    mc.add_argument("--tenant", default="", help="whose memory (default: run's)")
    ms = msub.add_parser("show", help="a memory's settings and newest messages, as JSON")
    ms.add_argument("memory", help="the memory id")
    ms.add_argument("--limit", type=int, default=20, help="messages shown (default %(default)s)")
    mq = msub.add_parser("search", help="a memory's messages most like a query, as JSON")
    mq.add_argument("memory", help="the memory id")
    mq.add_argument("query")
    mq.add_argument("--top-n", type=int, default=5)
    mq.add_argument("--user-id", default="", help="only this user's messages")
    md = msub.add_parser("delete", help="delete memories with their messages")
    md.add_argument("memories", nargs="+", metavar="ID")
    for command in (ml, mc, ms, mq, md):
        add_db(command, "sessions database (the memory store is beside it, or in it on PostgreSQL)")
    m.set_defaults(func="canvas2graph.cli.memory:cmd_memory")


def cmd_memory(args: argparse.Namespace) -> int:
    return asyncio.run(_memory(args))


async def _memory(args: argparse.Namespace) -> int:
    from canvas2graph.runtime.services.memory import MemoryBook, MemoryRefused
    from canvas2graph.runtime.services.memory.stores import open_memory_store
    async with open_memory_store(args.db) as store:
        try:
            if args.memory_command == "list":
                rows = await _rows(store, args.tenant)
                if args.format == "json":
                    print(json.dumps(rows, ensure_ascii=False, indent=2))
                else:
                    for r in rows:
                        print(f"{r['id']}  {r['tenant'] or '-':<16} {r['name']:<24} {','.join(r['memory_type']):<28} "
                              f"{r['messages']:>6} messages {r['bytes']:>10} bytes")
                    print(f"{len(rows)} memories")
            elif args.memory_command == "create":
                kinds = [k.strip() for k in args.type.split(",") if k.strip()]
                memory = await MemoryBook(store, args.tenant).create(args.name, kinds, args.embd_id, args.llm_id)
                print(memory.id)
            elif args.memory_command == "show":
                book = await _owner(store, args.memory)
                memory = await book.get(args.memory)
                recent = await book.recent([memory.id], limit=args.limit)
                print(json.dumps({"memory": memory.api(), "bytes": await book.usage(memory.id),
                                  "messages": [m.api() for m in recent]}, ensure_ascii=False, indent=2))
            elif args.memory_command == "search":
                book = await _owner(store, args.memory)
                found = await book.search([args.memory], args.query, top_n=args.top_n, user_id=args.user_id)
                print(json.dumps([m.api() for m in found], ensure_ascii=False, indent=2))
            else:
                for memory_id in args.memories:
                    await (await _owner(store, memory_id)).delete(memory_id)
                    print(f"deleted {memory_id}")
        except MemoryRefused as e:
            raise UsageError(str(e)) from None
    return 0


async def _tenants(store: Any) -> list[str]:
    spaces = await store.alist_namespaces(suffix=("memories",), max_depth=2, limit=10_000)
    return [s[0] for s in spaces if len(s) == 2]


async def _rows(store: Any, tenant: str | None) -> list[dict]:
    from canvas2graph.runtime.services.memory import MemoryBook
    from canvas2graph.runtime.services.memory.book import label
    roots = [label(tenant)] if tenant is not None else await _tenants(store)
    rows = []
    for root in roots:
        book = MemoryBook(store, "")
        book.root = root
        for memory in await book.all():
            rows.append({**memory.api(), "tenant": memory.tenant_id, "messages": len(await book.messages(memory.id)),
                         "bytes": await book.usage(memory.id)})
    return rows


async def _owner(store: Any, memory_id: str):
    """The book of the tenant whose memory this is."""
    from canvas2graph.runtime.services.memory import MemoryBook, MemoryNotFound
    for root in await _tenants(store):
        book = MemoryBook(store, "")
        book.root = root
        try:
            memory = await book.get(memory_id)
        except MemoryNotFound:
            continue
        return MemoryBook(store, memory.tenant_id)
    raise MemoryNotFound(f"Memory '{memory_id}' not found.")

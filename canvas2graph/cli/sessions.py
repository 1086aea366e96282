"""`canvas2graph sessions list|show|delete|prune`: what a sessions database holds, and clearing it.

    canvas2graph sessions list [--db ...] [--format text|json]
    canvas2graph sessions show ID [--db ...]
    canvas2graph sessions delete ID... [--db ...] [--vacuum]
    canvas2graph sessions prune --older-than DURATION [--db ...] [--dry-run] [--vacuum]

Any store `--db` names (a SQLite file or a postgresql:// URL), sessions of `run` and of `serve` alike;
the work is runtime/run/lifecycle.py's. A server running on the same database may keep serving meanwhile:
deletion goes in batches, and a session whose turn is running elsewhere is left alone by `prune`.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

from canvas2graph.types import UsageError
from canvas2graph.cli.parser import add_db


def register(sub) -> None:
    """Add `sessions` to the `canvas2graph` argument tree (`canvas2graph/cli/main.py:parser`)."""
    s = sub.add_parser("sessions", help="list, show, delete or prune stored sessions (any store)")
    ssub = s.add_subparsers(dest="sessions_command", required=True, metavar="ACTION",
                            help="list, show, delete or prune")
    sl = ssub.add_parser("list", help="every session: id, last activity, steps stored, tenant and agent")
    sl.add_argument("--format", choices=["text", "json"], default="text", help="text (default) or JSON")
    sh = ssub.add_parser("show", help="one session as JSON: last activity, steps, pending writes, turns")
    sh.add_argument("session", help="the session id")
    sd = ssub.add_parser("delete", help="delete sessions: their checkpoints, pending writes, trace and record")
    sd.add_argument("sessions", nargs="+", metavar="ID", help="session ids")
    sp = ssub.add_parser("prune", help="delete the sessions idle for a duration or more")
    sp.add_argument("--older-than", required=True, metavar="DURATION",
                    help="idle time: a number with s, m, h, d or w (30d, 12h); 0 deletes every idle session")
    sp.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    for command in (sd, sp):
        command.add_argument("--vacuum", action="store_true",
                             help="SQLite: then rebuild the file to give the space back (it waits for other "
                                  "users of the file meanwhile); files made by this version need no --vacuum")
    for command in (sl, sh, sd, sp):
        add_db(command, "sessions database: a SQLite file or a postgresql:// URL")
    s.set_defaults(func="canvas2graph.cli.sessions:cmd_sessions")


def cmd_sessions(args: argparse.Namespace) -> int:
    from canvas2graph.runtime.run.lifecycle import LifecycleError
    try:
        return asyncio.run(_sessions(args))
    except LifecycleError as e:
        raise UsageError(str(e)) from None


async def _sessions(args: argparse.Namespace) -> int:
    from canvas2graph.runtime.run import lifecycle
    from canvas2graph.server.backend.store import open_store
    async with open_store(args.db) as store:
        action = args.sessions_command
        if action == "list":
            sessions = await lifecycle.list_sessions(store)
            if args.format == "json":
                print(json.dumps([s.as_dict() for s in sessions], indent=1))
            for s in sessions if args.format == "text" else ():
                print(f"{s.id}  {s.as_dict()['last_active']}  {s.steps} steps"
                      + (f"  tenant {s.tenant}" if s.tenant else "") + (f"  agent {s.agent_id}" if s.agent_id else ""))
            if args.format == "text":
                print(f"{len(sessions)} session{'s' * (len(sessions) != 1)}")
        elif action == "show":
            print(json.dumps(await lifecycle.show_session(store, args.session), indent=1, default=str))
        elif action == "delete":
            known = {s.id for s in await lifecycle.list_sessions(store)}
            missing = [sid for sid in args.sessions if sid not in known]
            if missing:
                raise lifecycle.LifecycleError(f"no session {', '.join(missing)} in this database; nothing deleted")
            count = await lifecycle.delete_sessions(store, args.sessions)
            print(f"deleted {count} session{'s' * (count != 1)}")
        else:
            seconds = lifecycle.parse_duration(args.older_than)
            if args.dry_run:
                idle = await lifecycle.idle_sessions(store, seconds)
                for s in idle:
                    print(f"{s.id}  {s.as_dict()['last_active']}")
                print(f"would delete {len(idle)} session{'s' * (len(idle) != 1)} idle for {args.older_than} or more")
                return 0
            started = time.monotonic()
            # a running turn renews its lease: prune leaves a server's running sessions alone
            live = {s.id for s in await lifecycle.idle_sessions(store, seconds)
                    if s.tenant is not None and await store.lease_is_live(s.id)}
            pruned = await lifecycle.prune(store, seconds, keep=live)
            print(f"deleted {len(pruned)} session{'s' * (len(pruned) != 1)} idle for {args.older_than} or more "
                  f"({time.monotonic() - started:.1f} s)")
        if action in ("delete", "prune") and args.vacuum:
            lifecycle.vacuum(store)
    return 0

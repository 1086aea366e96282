"""Connections to hosts a DSL names: refuse non-public addresses, and connect to the address checked.

A canvas author chooses the URL of an Invoke and the database host of an ExeSQL; the server running
the canvas connects to them. Without a guard, a canvas could read services only the server can reach
(the sessions database, cloud metadata at 169.254.169.254, an admin port on 127.0.0.1), which is why
RAGFlow refuses such hosts in both components. The host name is resolved once, every address it
resolves to must be public, and the caller connects to the address returned (DNS pinning), so a
second lookup cannot lead elsewhere.

Intranet services are legitimate targets too, so the guard can be lifted per component:
- the environment: `CANVAS2GRAPH_<COMPONENT>_ALLOW_PRIVATE=1` (`CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE`,
  `CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE`);
- a run's services: `ctx.extras["allow_private"]`, either `True` (every component) or a collection
  of component names (`{"Invoke"}`), for embedders and servers that configure runs in code.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from typing import Any

from nodes.tool import ToolError

EXTRAS_KEY = "allow_private"
TRUE_WORDS = ("1", "true", "yes", "on")


class HostRefused(ToolError):
    """The host is (or resolves to) an address the guard does not allow."""


def allow_env(component: str) -> str:
    return f"CANVAS2GRAPH_{component.upper()}_ALLOW_PRIVATE"


def private_allowed(ctx: Any, component: str) -> bool:
    """Whether `component` may connect to private, loopback and other non-public addresses."""
    if os.environ.get(allow_env(component), "").strip().lower() in TRUE_WORDS:
        return True
    policy = (getattr(ctx, "extras", None) or {}).get(EXTRAS_KEY)
    if policy is True:
        return True
    return isinstance(policy, (set, frozenset, list, tuple)) and component in policy


def public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:       # ::ffff:127.0.0.1 is 127.0.0.1
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ToolError(f"cannot resolve the host {host!r}: {e.strerror or e}") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


async def pinned_address(host: str, port: int, component: str) -> str:
    """The one address to connect to for `host`: resolved once, refused unless every address is public."""
    addresses = await resolve(host, port)
    if not addresses:
        raise ToolError(f"cannot resolve the host {host!r}")
    for address in addresses:
        if not public(address):
            shown = host if host == address else f"{host} ({address})"
            raise HostRefused(f"{shown} is a private, loopback or otherwise non-public address; set "
                              f"{allow_env(component)}=1 to let {component} connect to such hosts")
    return addresses[0]

"""The host guard: every connection whose destination a DSL, a model or a tool result chooses goes through it.

A canvas names hosts (Invoke's URL, ExeSQL's database, Email's SMTP server, a Crawler proxy), models
pick URLs (Crawler, SearXNG as Agent tools), and pages answer with redirects. The process connecting
to them can reach what the canvas author cannot: the sessions database on 127.0.0.1, cloud metadata
at 169.254.169.254, admin ports on the intranet. So, unless the operator allows it per component:

- a host is resolved once, and refused when ANY address it resolves to is private, loopback,
  link-local (metadata services), multicast, reserved or otherwise not global;
- the connection goes to the address that was checked (DNS pinning): a second lookup, which a
  hostile DNS server could answer differently ("rebinding"), never happens;
- HTTP clients check every connection they open, so each redirect is checked like the first URL;
- a proxy is a host like any other, and the target behind it is checked too (the proxy resolves
  it, in its own network).

The switches (operator only; nothing in a DSL or a request reaches them):
- `CANVAS2GRAPH_<COMPONENT>_ALLOW_PRIVATE=1` in the environment (`INVOKE`, `CRAWLER`, `SEARXNG`,
  `EMAIL`, `EXESQL`, `MCP`, and any component that uses the guard);
- a run's services: `ctx.extras["allow_private"]`, `True` (every component) or a collection of
  component names (`{"Invoke"}`), for embedders and servers that configure runs in code.

How a component uses it (`guard = HostGuard.of("MyTool", ctx)`):
- an httpx client: `httpx.AsyncClient(transport=guard.transport(proxy=...))`: every TCP connection
  it opens (redirects and the proxy included) goes to a checked, pinned address, and TLS still
  verifies the host's name;
- an MCP (httpx2) client: `guard.transport2()`, the same for the `httpx2` package the MCP SDK uses;
- a raw socket or a driver (SMTP, a database): `address = await guard.address(host, port)`, then
  connect to `address` (keep `host` for TLS and SNI);
- a URL handed to something that connects by itself (a browser): `await guard.check_url(url)` before
  each navigation and each request it intercepts (it returns the checked address, for resolver
  rules that pin it), and `await guard.check_proxy(proxy_url)` for its proxy.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any, Collection
from urllib.parse import urlsplit

EXTRAS_KEY = "allow_private"
TRUE_WORDS = ("1", "true", "yes", "on")
WEB_SCHEMES = ("http", "https")


class HostRefused(Exception):
    """The host is (or resolves to) an address the guard does not allow, or the URL cannot be checked."""


def allow_env(component: str) -> str:
    return f"CANVAS2GRAPH_{component.upper()}_ALLOW_PRIVATE"


def private_allowed(ctx: Any, component: str) -> bool:
    """Whether the operator lets `component` connect to private, loopback and other non-public addresses."""
    if os.environ.get(allow_env(component), "").strip().lower() in TRUE_WORDS:
        return True
    policy = (getattr(ctx, "extras", None) or {}).get(EXTRAS_KEY)
    if policy is True:
        return True
    return isinstance(policy, (set, frozenset, list, tuple)) and component in policy


def public(address: str) -> bool:
    """A global unicast address: not private, loopback, link-local, shared (CGNAT), reserved or multicast."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:       # ::ffff:127.0.0.1 is 127.0.0.1
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order (an address resolves to itself)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise HostRefused(f"cannot resolve the host {host!r}: {getattr(e, 'strerror', None) or e}") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


@dataclass(frozen=True)
class HostGuard:
    """The guard for one component's connections; `allow_private` is the operator's switch for it."""

    component: str
    allow_private: bool = False

    @classmethod
    def of(cls, component: str, ctx: Any = None) -> "HostGuard":
        return cls(component, private_allowed(ctx, component))

    @property
    def switch(self) -> str:
        return allow_env(self.component)

    # --- addresses --------------------------------------------------------------------------
    async def address(self, host: str, port: int) -> str:
        """The one address to connect to for `host`: resolved once, refused unless every address is public.

        When the operator allows private hosts the guard steps aside and returns `host` itself.
        """
        host = (host or "").strip().strip("[]")
        if not host:
            raise HostRefused(f"{self.component}: no host to connect to")
        if self.allow_private:
            return host
        addresses = await resolve(host, port)
        if not addresses:
            raise HostRefused(f"cannot resolve the host {host!r}")
        for address in addresses:
            if not public(address):
                shown = host if host == address else f"{host} ({address})"
                raise HostRefused(f"{shown} is a private, loopback or otherwise non-public address; set "
                                  f"{self.switch}=1 to let {self.component} connect to such hosts")
        return addresses[0]

    async def check_url(self, url: str, schemes: Collection[str] = WEB_SCHEMES) -> str:
        """Check a URL's scheme and host; returns the address its host was pinned to."""
        parts = urlsplit(url)
        if parts.scheme not in schemes or not parts.hostname:
            wanted = " or ".join(f"{s}://" for s in schemes)
            raise HostRefused(f"URL not valid: {url!r} is not a {wanted} address")
        try:
            port = parts.port or default_port(parts.scheme)
        except ValueError:
            raise HostRefused(f"URL not valid: {url!r} has a bad port") from None
        return await self.address(parts.hostname, port)

    async def check_proxy(self, proxy: str) -> str:
        """A proxy URL (http:// or https://) whose host may be connected to; returns its checked address."""
        return await self.check_url(proxy)

    # --- HTTP clients -------------------------------------------------------------------------
    def transport(self, *, proxy: str | None = None, **options: Any):
        """An httpx transport that connects only to checked, pinned addresses (options as httpx's own)."""
        import httpx
        return CheckedTransport(self, httpx.AsyncHTTPTransport(proxy=proxy, **options), proxied=bool(proxy))

    def transport2(self, *, proxy: str | None = None, **options: Any):
        """The same for `httpx2` (the MCP SDK's HTTP client)."""
        import httpx2
        return CheckedTransport(self, httpx2.AsyncHTTPTransport(proxy=proxy, **options), proxied=bool(proxy))


class PinningBackend:
    """An httpcore network backend that resolves, checks and pins every TCP connection it opens.

    httpcore's pools take a network backend (their documented extension point); TLS is started on
    the connected stream with the origin's host name, so certificates are still checked for the name.
    """

    def __init__(self, guard: HostGuard, inner: Any):
        self.guard = guard
        self.inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> Any:
        address = await self.guard.address(host, port)
        return await self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                            socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise HostRefused(f"{self.guard.component}: connections to local sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class CheckedTransport:
    """An httpx (or httpx2) transport whose connections go through a `PinningBackend`.

    The pool inside the library's transport is given the backend; with a proxy the pool connects to
    the proxy (checked that way) and the target, which the proxy resolves, is checked per request.
    """

    def __init__(self, guard: HostGuard, inner: Any, *, proxied: bool):
        pool = getattr(inner, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:          # a new httpx/httpcore layout: fail loudly rather than connect unchecked
            raise RuntimeError("the host guard cannot attach to this version of httpx (no connection pool backend)")
        pool._network_backend = PinningBackend(guard, backend)
        self.guard = guard
        self.inner = inner
        self.proxied = proxied

    async def handle_async_request(self, request: Any) -> Any:
        url = request.url
        if url.scheme not in WEB_SCHEMES:
            raise HostRefused(f"URL not valid: {url.scheme}:// is not http:// or https://")
        if self.proxied:
            await self.guard.address(url.host, url.port or default_port(url.scheme))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> "CheckedTransport":
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)

"""A resolver the tests control, for the host guard (canvas2graph.runtime.services.netguard).

Invented names resolve to the addresses a test gives them, and 127.0.0.1 counts as public, so a local
server can stand for a public host; every other address keeps its real classification (metadata,
RFC 1918, link-local, localhost's ::1). `FakeDNS.install(monkeypatch)` puts it in place.
"""
from __future__ import annotations

import canvas2graph.runtime.services.netguard as netguard

REAL_RESOLVE = netguard.resolve
REAL_PUBLIC = netguard.public


class FakeDNS:
    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}
        self.lookups: list[str] = []
        self.public = {"127.0.0.1"}          # addresses that pass as public

    async def resolve(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host in self.names:
            return list(self.names[host])
        return await REAL_RESOLVE(host, port)

    def is_public(self, address: str) -> bool:
        return address in self.public or REAL_PUBLIC(address)

    @classmethod
    def install(cls, monkeypatch) -> "FakeDNS":
        fake = cls()
        monkeypatch.setattr(netguard, "resolve", fake.resolve)
        monkeypatch.setattr(netguard, "public", fake.is_public)
        return fake

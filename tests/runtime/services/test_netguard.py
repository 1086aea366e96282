"""The host guard (canvas2graph.runtime.services.netguard): which addresses are refused, how a name is pinned to the address
checked, and the HTTP transports that check every connection they open (redirects and proxies included).

The tests run against real HTTP servers on 127.0.0.1, which stand for public hosts through a fake
resolver (tests/fake_dns.py): invented names resolve to 127.0.0.1 and that one address counts as
public; every other address keeps its real classification.
"""
from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import httpx2
import pytest
import trustme

from canvas2graph.runtime.services.netguard import HostGuard, HostRefused, public
from tests.fake_dns import FakeDNS
from tests.nodes.tools.support import FakeService, Reply

@pytest.fixture
def dns(monkeypatch) -> FakeDNS:
    return FakeDNS.install(monkeypatch)


@pytest.fixture
def site():
    service = FakeService().start()
    yield service
    service.stop()


def port_of(service: FakeService) -> int:
    return int(service.url.rsplit(":", 1)[1])


# --- which addresses -------------------------------------------------------------------------------

@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "::1", "0.0.0.0", "::",                  # loopback and unspecified
    "10.1.2.3", "172.16.0.1", "192.168.1.1", "fd00::1",                # private networks
    "169.254.169.254", "fe80::1", "fd00:ec2::254",                     # link-local: cloud metadata (AWS v4 and v6)
    "100.100.100.200", "100.64.0.1",                                   # shared address space (Alibaba metadata)
    "::ffff:127.0.0.1", "::ffff:169.254.169.254",                      # IPv4-mapped IPv6
    "224.0.0.1", "ff02::1", "240.0.0.1", "192.0.2.1", "198.18.0.1",     # multicast, reserved, documentation, benchmark
])
def test_non_public_addresses(address):
    assert not public(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"])
def test_public_addresses(address):
    assert public(address)


# --- resolve once, refuse if any address is not public, connect to the one checked -----------------

async def test_a_name_is_refused_when_any_of_its_addresses_is_private(dns):
    dns.names["mixed.example"] = ["93.184.216.34", "10.0.0.5"]
    with pytest.raises(HostRefused, match=r"mixed.example \(10.0.0.5\) is a private, loopback or otherwise "
                                          r"non-public address; set CANVAS2GRAPH_TOOLX_ALLOW_PRIVATE=1"):
        await HostGuard("ToolX").address("mixed.example", 443)


async def test_the_address_returned_is_the_first_one_checked_after_a_single_lookup(dns):
    dns.names["api.example"] = ["93.184.216.34", "93.184.216.35"]
    assert await HostGuard("ToolX").address("api.example", 443) == "93.184.216.34"
    assert dns.lookups == ["api.example"]


async def test_when_the_operator_allows_private_hosts_the_guard_steps_aside(dns, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TOOLX_ALLOW_PRIVATE", "1")
    assert await HostGuard.of("ToolX").address("10.0.0.5", 5432) == "10.0.0.5"
    assert dns.lookups == []


def test_the_switches_are_per_component_and_a_run_may_set_them():
    class Ctx:
        extras = {"allow_private": {"Invoke"}}
    assert HostGuard.of("Invoke", Ctx()).allow_private and not HostGuard.of("Crawler", Ctx()).allow_private
    Ctx.extras = {"allow_private": True}
    assert HostGuard.of("Crawler", Ctx()).allow_private
    assert not HostGuard.of("Crawler", None).allow_private


@pytest.mark.parametrize("url, words", [
    ("file:///etc/passwd", "is not a http:// or https:// address"),
    ("gopher://example.com/", "is not a http:// or https:// address"),
    ("http:///nohost", "is not a http:// or https:// address"),
    ("http://example.com:99999/", "has a bad port"),
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is a private"),
])
async def test_check_url_refuses_other_schemes_bad_ports_and_private_hosts(url, words):
    with pytest.raises(HostRefused, match=words):
        await HostGuard("Browser").check_url(url)


async def test_an_unresolvable_host_is_a_clear_refusal():
    with pytest.raises(HostRefused, match="cannot resolve the host 'no-such-host.invalid'"):
        await HostGuard("ToolX").address("no-such-host.invalid", 80)


# --- the HTTP transports ---------------------------------------------------------------------------

async def test_the_transport_connects_to_the_checked_address_and_keeps_the_name(dns, site):
    dns.names["site.example"] = ["127.0.0.1"]
    site.on("GET", "/page", Reply(200, "hello"))
    async with httpx.AsyncClient(transport=HostGuard("ToolX").transport()) as client:
        response = await client.get(f"http://site.example:{port_of(site)}/page")
    assert response.text == "hello" and str(response.url) == f"http://site.example:{port_of(site)}/page"
    assert site.requests[0].headers["host"] == f"site.example:{port_of(site)}"
    assert dns.lookups == ["site.example"]


@pytest.fixture
def tls_site():
    """An HTTPS server on 127.0.0.1 whose certificate names secure.example (from a test CA)."""
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("secure.example").configure_cert(context)

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    yield server.server_address[1], client_context
    server.shutdown()
    server.server_close()


async def test_tls_verifies_the_hosts_name_while_the_connection_goes_to_the_checked_address(dns, tls_site):
    port, trust = tls_site
    dns.names["secure.example"] = ["127.0.0.1"]
    dns.names["other.example"] = ["127.0.0.1"]
    async with httpx.AsyncClient(transport=HostGuard("ToolX").transport(verify=trust)) as client:
        assert (await client.get(f"https://secure.example:{port}/")).text == "hello"
        with pytest.raises(httpx.ConnectError, match="certificate verify failed|Hostname mismatch"):
            await client.get(f"https://other.example:{port}/")       # the certificate is not for this name


async def test_a_name_that_rebinds_to_a_private_address_is_refused_at_the_next_connection(dns, site):
    """DNS rebinding: the first answer is public, the next one points inside. Each connection is made to
    the address its own check returned, so the second one is refused and never reaches the inside."""
    dns.names["rebind.example"] = ["127.0.0.1"]
    site.on("GET", "/x", Reply(200, "outside"))
    url = f"http://rebind.example:{port_of(site)}/x"
    async with httpx.AsyncClient(transport=HostGuard("ToolX").transport()) as client:
        assert (await client.get(url)).text == "outside"          # the test server closes each connection
        dns.names["rebind.example"] = ["169.254.169.254"]
        with pytest.raises(HostRefused, match=r"rebind.example \(169.254.169.254\) is a private"):
            await client.get(url)
    assert len(site.requests) == 1


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://10.20.30.40/admin",
                                    "http://[::1]:9/", "http://inside.example/"])
async def test_every_redirect_is_checked_before_it_is_followed(dns, site, target):
    dns.names["site.example"] = ["127.0.0.1"]
    dns.names["inside.example"] = ["192.168.0.10"]
    site.on("GET", "/go", Reply(302, "", headers={"Location": target}))
    async with httpx.AsyncClient(transport=HostGuard("ToolX").transport(), follow_redirects=True) as client:
        with pytest.raises(HostRefused, match="is a private, loopback or otherwise non-public address"):
            await client.get(f"http://site.example:{port_of(site)}/go")
    assert [r.path for r in site.requests] == ["/go"]


async def test_a_private_proxy_is_refused_before_anything_is_sent(dns, site):
    dns.public = set()                                      # 127.0.0.1 is itself again
    dns.names["example.com"] = ["93.184.216.34"]
    site.on("GET", "/data", Reply(200, "via proxy"))
    async with httpx.AsyncClient(transport=HostGuard("ToolX").transport(proxy=site.url)) as client:
        with pytest.raises(HostRefused, match="127.0.0.1 is a private"):
            await client.get("http://example.com/data")
    assert site.requests == []


async def test_behind_a_proxy_the_target_is_checked_too(dns, site):
    """The proxy resolves the target itself, so the guard checks the target by name first: a proxy
    must not carry requests to metadata or intranet addresses."""
    dns.names["proxy.example"] = ["127.0.0.1"]
    site.on("GET", "/data", Reply(200, "via proxy"))
    proxy = f"http://proxy.example:{port_of(site)}"
    async with httpx.AsyncClient(transport=HostGuard("ToolX").transport(proxy=proxy)) as client:
        with pytest.raises(HostRefused, match="169.254.169.254 is a private"):
            await client.get("http://169.254.169.254/latest/meta-data/")
        dns.names["upstream.example"] = ["93.184.216.34"]
        assert (await client.get("http://upstream.example/data")).text == "via proxy"
    assert [(r.path, r.headers["host"]) for r in site.requests] == [("/data", "upstream.example")]


async def test_local_sockets_are_refused():
    transport = HostGuard("ToolX").transport(uds="/var/run/docker.sock")
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(HostRefused, match="connections to local sockets are not allowed"):
            await client.get("http://docker/containers/json")


async def test_the_httpx2_transport_for_mcp_checks_connections_the_same_way(dns, site):
    site.on("GET", "/mcp", Reply(200, "ok"))
    async with httpx2.AsyncClient(transport=HostGuard("MCP").transport2()) as client:
        with pytest.raises(HostRefused, match="set CANVAS2GRAPH_MCP_ALLOW_PRIVATE=1"):
            await client.get(f"http://10.0.0.1:{port_of(site)}/mcp")
        dns.names["mcp.example"] = ["127.0.0.1"]
        assert (await client.get(f"http://mcp.example:{port_of(site)}/mcp")).text == "ok"

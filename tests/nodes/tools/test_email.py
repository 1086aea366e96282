"""Email sends through a real SMTP server (aiosmtpd) on 127.0.0.1: TLS from the start, STARTTLS or a plain
connection, a login, then the message the server receives: sender, recipients, UTF-8 subject, text and
HTML bodies. Refused logins, unreachable servers and TLS mismatches are clear errors. The server a DSL
names passes the host guard: these tests lift it (CANVAS2GRAPH_EMAIL_ALLOW_PRIVATE=1) for the local
server, except those that show the refusal and the pinning."""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from email import message_from_bytes, policy

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from canvas2graph.nodes.tool import ToolError
from canvas2graph.runtime.services.netguard import HostRefused
from canvas2graph.nodes.tools.email import EmailParams
from tests.fake_dns import FakeDNS
from tests.nodes.helpers import build, context, errors
from tests.nodes.tools.support import agent_dsl, finished, node_dsl, run_turn, tool_messages

PASSWORD = "s3cret-app-code"
ALLOW = "CANVAS2GRAPH_EMAIL_ALLOW_PRIVATE"


@pytest.fixture(autouse=True)
def allowed(monkeypatch):
    monkeypatch.setenv(ALLOW, "1")


@dataclass
class Mailbox:
    """What the SMTP server accepted: envelopes and the logins it saw."""

    messages: list = field(default_factory=list)
    logins: list = field(default_factory=list)
    busy: int = 0                   # how many messages to turn away with a temporary failure first

    async def handle_DATA(self, server, session, envelope):
        if self.busy > 0:
            self.busy -= 1
            return "451 Busy, try again later"
        self.messages.append(envelope)
        return "250 Message accepted"

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        login, password = (v.decode() if isinstance(v, bytes) else v for v in (auth_data.login, auth_data.password))
        self.logins.append(login)
        return AuthResult(success=password == PASSWORD, handled=False)

    def only(self):
        [envelope] = self.messages
        raw = (envelope.original_content or envelope.content).replace(b"\r\n", b"\n")
        return envelope, message_from_bytes(raw, policy=policy.default)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture
def trusted(ca, tmp_path, monkeypatch):
    """The client trusts the test CA (ssl.create_default_context reads SSL_CERT_FILE)."""
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    monkeypatch.setenv("SSL_CERT_FILE", str(path))


@pytest.fixture
def smtp(ca):
    """start(mode) -> (Mailbox, port): mode is "ssl" (TLS from the start), "starttls" or "plain"."""
    started = []

    def start(mode: str):
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1", "localhost", "mail.example").configure_cert(server_ctx)
        box = Mailbox()
        # with TLS from the start aiosmtpd does not know the connection is encrypted: it must offer AUTH anyway
        # one mechanism (PLAIN), so each connection tries one login
        kwargs = {"authenticator": box.authenticate, "auth_require_tls": mode == "starttls",
                  "auth_exclude_mechanism": ["LOGIN"]}
        if mode == "ssl":
            kwargs["ssl_context"] = server_ctx
        elif mode == "starttls":
            kwargs.update(tls_context=server_ctx, require_starttls=True)
        port = free_port()
        controller = Controller(box, hostname="127.0.0.1", port=port, **kwargs)
        controller.start()
        started.append(controller)
        return box, port

    yield start
    for controller in started:
        controller.stop()


def params(port: int, **more) -> dict:
    return {"smtp_server": "127.0.0.1", "smtp_port": port, "email": "bot@example.com", "password": PASSWORD,
            "sender_name": "Support Desk", **more}


async def send(port: int, args: dict, **more):
    node = build("Email:E", "Email", {**params(port, **more), "to_email": "sys.query", "cc_email": "",
                                      "subject": "", "content": ""})
    return await node.call(args, context())


async def test_starttls_login_and_the_message_the_server_receives(smtp, trusted):
    box, port = smtp("starttls")
    outputs, _, text = await send(port, {"to_email": "ada@example.com, grace@example.org",
                                         "cc_email": "linus@example.net", "subject": "Grüße – 你好",
                                         "content": "Your order shipped.\nThank you!"})
    assert outputs == {"success": True}
    assert text == "The email was sent to ada@example.com, grace@example.org (cc: linus@example.net)."
    envelope, message = box.only()
    assert envelope.mail_from == "bot@example.com"
    assert envelope.rcpt_tos == ["ada@example.com", "grace@example.org", "linus@example.net"]
    assert box.logins == ["bot@example.com"]
    assert message["From"] == "Support Desk <bot@example.com>"
    assert message["To"] == "ada@example.com, grace@example.org" and message["Cc"] == "linus@example.net"
    assert message["Subject"] == "Grüße – 你好"
    assert "=?utf-8?" in envelope.original_content.decode().split("Subject:")[1].splitlines()[0]
    assert message.get_content_type() == "multipart/alternative"
    plain = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    assert plain == "Your order shipped.\nThank you!\n"
    assert html.strip() == "<html><body>Your order shipped.<br>\nThank you!</body></html>"


async def test_tls_from_the_start_and_the_login_name_from_smtp_username(smtp, trusted):
    box, port = smtp("ssl")
    content = "<p>Hello <b>Ada</b></p>"
    outputs, _, _ = await send(port, {"to_email": "ada@example.com", "subject": "Hi", "content": content},
                               smtp_security="ssl", smtp_username="mailer")
    assert outputs == {"success": True} and box.logins == ["mailer"]
    _, message = box.only()
    assert message.get_body(("html",)).get_content().strip() == content       # HTML content is sent as it is


def test_port_465_means_tls_from_the_start_and_other_ports_starttls():
    assert EmailParams(**params(465)).mode() == "ssl"
    assert EmailParams(**params(587)).mode() == "starttls"
    assert EmailParams(**params(465, smtp_security="STARTTLS")).mode() == "starttls"
    assert EmailParams.model_fields["smtp_port"].default == 465


async def test_a_plain_connection_when_asked_for(smtp):
    box, port = smtp("plain")
    outputs, _, _ = await send(port, {"to_email": "ada@example.com", "subject": "s", "content": "c"},
                               smtp_security="none")
    assert outputs == {"success": True} and len(box.messages) == 1


async def test_a_model_that_leaves_out_subject_and_content(smtp, trusted):
    box, port = smtp("starttls")
    await send(port, {"to_email": "ada@example.com"})
    _, message = box.only()
    assert message["Subject"] == "(no subject)" and message.get_body(("plain",)).get_content() == "\n"


async def test_without_a_recipient_nothing_is_sent(smtp, trusted):
    box, port = smtp("starttls")
    outputs, _, text = await send(port, {"to_email": ""})
    assert outputs == {"success": False} and text == "No email was sent: no recipient was given."
    assert box.messages == []


async def test_a_refused_login_is_an_error_that_is_not_retried(smtp, trusted):
    box, port = smtp("starttls")
    with pytest.raises(ToolError) as caught:
        await send(port, {"to_email": "ada@example.com"}, password="wrong-password", max_retries=2,
                   delay_after_error=0)
    message = str(caught.value)
    assert message.startswith(f"the SMTP server 127.0.0.1:{port} refused the login of 'bot@example.com': 535")
    assert "wrong-password" not in message and not isinstance(caught.value, ConnectionError)
    assert box.messages == [] and box.logins == ["bot@example.com"]


async def test_as_agent_tool_a_temporary_failure_is_retried(smtp, trusted):
    box, port = smtp("starttls")
    box.busy = 1
    outputs, _, _ = await send(port, {"to_email": "ada@example.com"}, max_retries=1, delay_after_error=0)
    assert outputs == {"success": True} and len(box.messages) == 1 and len(box.logins) == 2
    box.busy = 1
    with pytest.raises(ToolError, match="answered: 451 Busy, try again later"):
        await send(port, {"to_email": "ada@example.com"})


async def test_an_unreachable_server_is_an_error_worth_retrying():
    port = free_port()
    with pytest.raises(ToolError) as caught:
        await send(port, {"to_email": "ada@example.com"}, smtp_security="none")
    assert str(caught.value).startswith(f"cannot reach the SMTP server 127.0.0.1:{port}: ")
    assert isinstance(caught.value, ConnectionError)


async def test_tls_mismatches_and_untrusted_certificates_are_explained(smtp, trusted, monkeypatch):
    _, plain_port = smtp("plain")
    with pytest.raises(ToolError, match=f"TLS with the SMTP server 127.0.0.1:{plain_port} failed: .*try smtp_security 'starttls'"):
        await send(plain_port, {"to_email": "ada@example.com"}, smtp_security="ssl")
    with pytest.raises(ToolError, match=f"the SMTP server 127.0.0.1:{plain_port} does not offer STARTTLS; set smtp_security"):
        await send(plain_port, {"to_email": "ada@example.com"})
    _, tls_port = smtp("starttls")
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", "/nonexistent")        # trust nothing: the test CA is unknown
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent")
    with pytest.raises(ToolError, match=f"TLS with the SMTP server 127.0.0.1:{tls_port} failed: its certificate is not trusted"):
        await send(tls_port, {"to_email": "ada@example.com"})


async def test_a_private_smtp_server_is_refused_unless_allowed(smtp, monkeypatch):
    box, port = smtp("plain")
    monkeypatch.delenv(ALLOW)
    with pytest.raises(HostRefused, match="127.0.0.1 is a private, loopback or otherwise non-public address; "
                                          "set CANVAS2GRAPH_EMAIL_ALLOW_PRIVATE=1 to let Email connect"):
        await send(port, {"to_email": "ada@example.com"}, smtp_security="none")
    assert box.messages == [] and box.logins == []


async def test_the_server_is_connected_at_the_address_checked_and_tls_checks_its_name(smtp, trusted, monkeypatch):
    """One lookup (a rebinding DNS gets no second chance), and the certificate is still verified for the
    server's name, not for the address."""
    box, port = smtp("ssl")
    monkeypatch.delenv(ALLOW)
    dns = FakeDNS.install(monkeypatch)                # 127.0.0.1 passes as public
    dns.names["mail.example"] = ["127.0.0.1"]
    await send(port, {"to_email": "ada@example.com"}, smtp_server="mail.example", smtp_security="ssl")
    assert dns.lookups == ["mail.example"] and len(box.messages) == 1


async def test_a_malformed_address_is_an_error():
    with pytest.raises(ToolError, match="to_email: 'not an address' is not an email address"):
        await send(1, {"to_email": "not an address"})


async def test_as_a_node_the_recipient_and_subject_come_from_the_canvas(smtp, trusted):
    box, port = smtp("starttls")
    dsl = node_dsl("Email:E", "Email", params(port, to_email="sys.query", subject="Order {sys.query}",
                                              content="Thanks, {sys.query}."), show="success")
    events = await run_turn(dsl, "ada@example.com")
    done = finished(events, "Email:E")
    assert done["outputs"]["success"] is True
    assert done["inputs"] == {"to_email": "ada@example.com", "cc_email": "", "content": "Thanks, ada@example.com.",
                              "subject": "Order ada@example.com"}
    _, message = box.only()
    assert message["Subject"] == "Order ada@example.com"


async def test_as_agent_tool_the_model_writes_the_email(smtp, trusted):
    box, port = smtp("starttls")
    tool = {"component_name": "Email", "name": "Email", "params": params(port)}
    call = {"name": "email_0", "arguments": {"to_email": "ada@example.com", "cc_email": "grace@example.org",
                                              "subject": "Your refund", "content": "It is on its way."}}
    await run_turn(agent_dsl(tool, cite=False), "Tell Ada", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    assert tool_messages() == ["The email was sent to ada@example.com (cc: grace@example.org)."]
    envelope, message = box.only()
    assert envelope.rcpt_tos == ["ada@example.com", "grace@example.org"] and message["Subject"] == "Your refund"


async def test_as_agent_tool_a_refused_login_is_what_the_model_reads(smtp, trusted):
    _, port = smtp("starttls")
    tool = {"component_name": "Email", "name": "Email", "params": params(port, password="wrong-password")}
    call = {"name": "email_0", "arguments": {"to_email": "ada@example.com"}}
    await run_turn(agent_dsl(tool, cite=False), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    [text] = tool_messages()
    assert text.startswith(f"Email error: the SMTP server 127.0.0.1:{port} refused the login")


@pytest.mark.parametrize("bad, field", [({"smtp_server": ""}, "params.smtp_server"), ({"email": ""}, "params.email"),
                                        ({"password": ""}, "params.password"), ({"sender_name": " "}, "params.sender_name"),
                                        ({"smtp_port": 0}, "params.smtp_port"),
                                        ({"smtp_security": "tls"}, "params.smtp_security")])
def test_bad_params_are_compile_errors_naming_the_field(bad, field):
    [error] = errors("Email", {**params(465), **bad})
    assert error.field == field

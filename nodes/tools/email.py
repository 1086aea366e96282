"""Email: send a message through an SMTP server (SPEC 3.17).

The connection follows `smtp_security` (a canvas2graph param; RAGFlow always tries STARTTLS):
- `auto` (the default): TLS from the first byte on port 465 (SMTPS, RAGFlow's default port), STARTTLS
  on any other port;
- `ssl`, `starttls`: that, whatever the port;
- `none`: no encryption, for a relay on a trusted network (the password then travels in clear).
Certificates are verified against the system's trust store (`SSL_CERT_FILE` names another bundle).
The login name is `smtp_username`, else `email`; the sender is `sender_name <email>`.

The message is multipart/alternative: the content as plain text, and as HTML (the content itself
when it is HTML, else the text with its line breaks kept). `to_email` and `cc_email` may hold several
addresses separated by commas. `success` is True once the server has accepted the message; an empty
`to_email` sends nothing and sets it False, as RAGFlow does. Failed logins and refused recipients are
errors at once; a server that cannot be reached is retried `max_retries` times.

The server is a host the DSL names, so it goes through the host guard (`canvas2graph.runtime.services.netguard`): resolved
once, refused when private or loopback unless `CANVAS2GRAPH_EMAIL_ALLOW_PRIVATE=1`, and connected to
at the address checked (TLS still verifies the server's name).
"""
from __future__ import annotations

import asyncio
import html
import re
import smtplib
import socket
import ssl
from email.message import EmailMessage
from email.utils import formataddr, parseaddr
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput
from canvas2graph.nodes.tools._web import ServiceUnavailable, text_arg, timeout_for
from canvas2graph.runtime.services.netguard import HostGuard

SECURITY = ("auto", "ssl", "starttls", "none")
HTML_TAG = re.compile(r"<(html|body|p|div|br|table|ul|ol|h[1-6]|span|a|b|i|strong|em)\b[^>]*>", re.IGNORECASE)


class EmailParams(Params):
    smtp_server: str = ""
    smtp_port: int = Field(465, gt=0, lt=65536)
    smtp_security: str = "auto"
    email: str = ""
    smtp_username: str | None = ""
    password: str = ""
    sender_name: str = ""

    @field_validator("smtp_server", "email", "password", "sender_name")
    @classmethod
    def _required(cls, v: str, info: ValidationInfo) -> str:
        if not v.strip():
            raise ValueError(f"{info.field_name} must not be empty")
        return v if info.field_name == "password" else v.strip()

    @field_validator("smtp_security")
    @classmethod
    def _security(cls, v: str) -> str:
        if v.lower() not in SECURITY:
            raise ValueError(f"smtp_security must be one of {', '.join(SECURITY)}, not {v!r}")
        return v.lower()

    def mode(self) -> str:
        if self.smtp_security != "auto":
            return self.smtp_security
        return "ssl" if self.smtp_port == 465 else "starttls"


@register("Email", EmailParams, outputs=lambda p: {"success"})
class Email(Tool):
    function_name = "email"
    tool_description = ("Send an email to one or more people, with optional CC recipients, a subject and a "
                        "body (plain text or HTML).")
    args = {
        "to_email": ToolArg("string", "The recipient's email address; several addresses are separated by commas.",
                            required=True, default="{sys.query}"),
        "cc_email": ToolArg("string", "Email addresses to copy, separated by commas.", default=""),
        "content": ToolArg("string", "The body of the email.", default=""),
        "subject": ToolArg("string", "The subject line of the email.", default=""),
    }

    async def call(self, args: dict, ctx, *, function_name: str | None = None, retry: bool = True, state=None):
        """As an Agent tool, retry only what may pass on another try (an unreachable server, a 4xx
        answer): a refused login or recipient fails at once, as in RAGFlow."""
        retries = self.params.max_retries if retry else 0
        while True:
            try:
                return await super().call(args, ctx, function_name=function_name, retry=False)
            except ServiceUnavailable:
                if retries <= 0:
                    raise
                retries -= 1
                await asyncio.sleep(self.params.delay_after_error)

    def thoughts(self, state) -> str:
        args = self.node_args(state)
        return f"Sending an email to {args.get('to_email') or '?'} (subject: {args.get('subject') or '-'})."

    async def execute(self, args: dict, ctx) -> ToolOutput:
        to = addresses(text_arg(args, "to_email"), "to_email")
        if not to:
            return ToolOutput({"success": False}, text="No email was sent: no recipient was given.")
        cc = addresses(text_arg(args, "cc_email"), "cc_email")
        p = self.params
        message = EmailMessage()
        message["From"] = formataddr((p.sender_name, p.email))
        message["To"] = ", ".join(to)
        if cc:
            message["Cc"] = ", ".join(cc)
        # a model that leaves out subject or content gets these; a canvas param set to "" sends ""
        message["Subject"] = str(args["subject"]) if args.get("subject") is not None else "(no subject)"
        body = str(args["content"]) if args.get("content") is not None else ""
        message.set_content(body)
        message.add_alternative(body if HTML_TAG.search(body) else as_html(body), subtype="html")
        address = await HostGuard.of("Email", ctx).address(p.smtp_server, p.smtp_port)
        await asyncio.to_thread(send, p, message, to + cc, timeout_for(30), address)
        shown = ", ".join(to) + (f" (cc: {', '.join(cc)})" if cc else "")
        return ToolOutput({"success": True}, text=f"The email was sent to {shown}.")


def addresses(text: str, field: str) -> list[str]:
    """The addresses in a comma-separated list ("Ada <ada@example.com>" gives ada@example.com)."""
    found = []
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        _, address = parseaddr(piece)
        if "@" not in address or any(c.isspace() for c in address):
            raise ToolError(f"{field}: {piece!r} is not an email address")
        found.append(address)
    return found


def as_html(text: str) -> str:
    return "<html><body>" + html.escape(text).replace("\n", "<br>\n") + "</body></html>"


def pinned(kind: type[smtplib.SMTP], address: str) -> type[smtplib.SMTP]:
    """`kind` connecting to `address` (the one the guard checked) while the server keeps its name for TLS."""
    class Pinned(kind):        # type: ignore[misc, valid-type]
        def _get_socket(self, host, port, timeout):
            return super()._get_socket(address, port, timeout)
    return Pinned


def send(p: EmailParams, message: EmailMessage, recipients: list[str], timeout: float, address: str) -> None:
    """Connect to `address`, secure, log in and send (blocking: runs in a worker thread)."""
    where = f"{p.smtp_server}:{p.smtp_port}"
    mode = p.mode()
    try:
        if mode == "ssl":
            server: smtplib.SMTP = pinned(smtplib.SMTP_SSL, address)(p.smtp_server, p.smtp_port, timeout=timeout,
                                                                     context=ssl.create_default_context())
        else:
            server = pinned(smtplib.SMTP, address)(p.smtp_server, p.smtp_port, timeout=timeout)
        with server:
            server.ehlo()
            if mode == "starttls":
                if not server.has_extn("starttls"):
                    raise ToolError(f"the SMTP server {where} does not offer STARTTLS; set smtp_security to 'ssl' "
                                    f"if it expects TLS from the start, or 'none' for an unencrypted connection")
                server.starttls(context=ssl.create_default_context())
                server.ehlo()
            if not server.has_extn("auth"):
                raise ToolError(f"the SMTP server {where} offers no login (AUTH) on this connection")
            server.login(p.smtp_username or p.email, p.password)
            server.send_message(message, from_addr=p.email, to_addrs=recipients)
    except ToolError:
        raise
    except smtplib.SMTPAuthenticationError as e:
        raise ToolError(f"the SMTP server {where} refused the login of {p.smtp_username or p.email!r}: "
                        f"{_reply(e)}; check the email (or smtp_username) and the password or "
                        f"authorization code") from None
    except smtplib.SMTPRecipientsRefused as e:
        refused = ", ".join(f"{addr} ({_reply_of(code, text)})" for addr, (code, text) in e.recipients.items())
        raise ToolError(f"the SMTP server {where} refused the recipients: {refused}") from None
    except smtplib.SMTPSenderRefused as e:
        raise ToolError(f"the SMTP server {where} refused the sender {p.email!r}: {_reply(e)}") from None
    except ssl.SSLCertVerificationError as e:
        raise ToolError(f"TLS with the SMTP server {where} failed: its certificate is not trusted "
                        f"({e.verify_message or e.reason})") from None
    except ssl.SSLError as e:
        hint = (" (the server may not expect TLS from the start: try smtp_security 'starttls')"
                if mode == "ssl" and "WRONG_VERSION_NUMBER" in str(e).upper() else "")
        raise ToolError(f"TLS with the SMTP server {where} failed: {e.reason or e}{hint}") from None
    except (smtplib.SMTPConnectError, smtplib.SMTPServerDisconnected, socket.timeout, TimeoutError) as e:
        raise ServiceUnavailable(f"the SMTP server {where} did not answer or closed the connection: "
                                 f"{e or type(e).__name__}") from None
    except smtplib.SMTPResponseException as e:
        error = ServiceUnavailable if 400 <= e.smtp_code < 500 else ToolError      # 4xx: try again later
        raise error(f"the SMTP server {where} answered: {_reply(e)}") from None
    except smtplib.SMTPException as e:
        raise ToolError(f"sending through the SMTP server {where} failed: {e}") from None
    except OSError as e:             # refused, unreachable, unknown host (SMTPException is an OSError too)
        raise ServiceUnavailable(f"cannot reach the SMTP server {where}: {e.strerror or e}") from None


def _reply(e: Any) -> str:
    return _reply_of(getattr(e, "smtp_code", None), getattr(e, "smtp_error", b""))


def _reply_of(code: Any, text: Any) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return f"{code} {text}".strip() if code else str(text)

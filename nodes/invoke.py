"""Invoke: one HTTP request to a URL the canvas names; the response text is its `result` (SPEC 3.15).

As in RAGFlow:
- `url` may contain references (`{sys.x}`, `{Cpn:Id@key}`), substituted by match position with
  the value's `str()`; a URL without http:// or https:// gets http://.
- `headers` is a JSON object; `{name}` placeholders in its string values are variables
  (`{sys.user_id}`, `{env.token}`, `{begin@token}`). A name that is not a variable is a compile error
  here (RAGFlow fails when the component runs).
- `variables` (`[{key, ref?, value?}]`) are sent as query parameters (GET) or as the body
  (POST/PUT: JSON, or a form with `datatype: formdata`). A `ref` wins when it resolves to a value,
  else `value` (text with references substituted), else "". In JSON mode a text that parses as JSON
  is sent as that JSON value.
- An HTTP error status is not a failure: its body is the result. `clean_html` reduces the body to
  its text (the title, then one line per block).
- A request that times out or cannot connect is tried `max_retries + 1` times, `delay_after_error`
  seconds apart; the last failure is the component's `_ERROR`.

The host guard (`canvas2graph.runtime.services.netguard`): only http and https, the host resolved once and refused when any
address is private, loopback, link-local or otherwise non-public, the connection made to the address
checked (the Host header and TLS name stay the host's), and redirects are not followed (a 3xx
response is the result). A proxy's host is checked and pinned the same way, and the target host is
checked too (the proxy resolves it). `CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE=1` (or
`ctx.extras["allow_private"]`) lifts the address check, for intranet APIs and tests.
"""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from canvas2graph.types import NodeConfigError
from canvas2graph.compiler.dsl.refs import Ref, Template, parse_ref
from canvas2graph.nodes.base import Node, Params, Result, bare_or_braced_ref, settle_pending
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tools._web import USER_AGENT, where
from canvas2graph.runtime.services.html_text import block_lines
from canvas2graph.runtime.services.netguard import HostGuard
from canvas2graph.runtime.graph.values import as_python_text, render, resolve

HEADER_PLACEHOLDER = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_.@-]*)\}")
MAX_BYTES = 10_000_000
DROPPED_TAGS = ("script", "style", "noscript", "template", "head", "svg", "iframe", "object", "embed")
BLOCKS = ("p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "li", "tr", "table",
          "pre", "blockquote", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd", "form")


# what another attempt may get past: timeouts, refused or dropped connections, a proxy that failed
if TYPE_CHECKING:
    import httpx


def retried() -> tuple[type[Exception], ...]:
    """The failures a retry may cure. httpx is imported here, not at the top: `canvas2graph compile`
    loads every component and sends nothing."""
    import httpx
    return (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)


class InvokeError(Exception):
    """The request failed (after its retries); the message is the component's `_ERROR`."""


class InvokeParams(Params):
    proxy: str | None = None
    headers: Any = ""
    method: str = "get"
    variables: list[Any] = Field(default_factory=list)
    url: str = ""
    timeout: int = Field(60, gt=0)
    clean_html: bool = False
    datatype: str = "json"

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v.lower() not in ("get", "post", "put"):
            raise ValueError(f"method must be get, post or put, not {v!r}")
        return v.lower()

    @field_validator("datatype")
    @classmethod
    def _datatype(cls, v: str) -> str:
        if v.lower() not in ("json", "formdata"):
            raise ValueError(f"datatype must be json or formdata, not {v!r}")
        return v.lower()

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("url must not be empty")
        return v.strip()

    @field_validator("clean_html", mode="before")
    @classmethod
    def _clean_html(cls, v: Any) -> Any:
        if not isinstance(v, bool):
            raise ValueError(f"clean_html must be true or false, not {v!r}")
        return v

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: Any) -> dict[str, Any]:
        if v is None or (isinstance(v, str) and not v.strip()):
            return {}
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError as e:
                raise ValueError(f"headers must be a JSON object: {e}") from None
        if not isinstance(v, dict):
            raise ValueError("headers must be a JSON object such as {\"Authorization\": \"Bearer {env.token}\"}")
        return v

    @field_validator("proxy")
    @classmethod
    def _proxy(cls, v: str | None) -> str | None:
        # RAGFlow ignores a proxy that is no more than a scheme ("http://")
        if not v or not re.sub(r"https?:?/?/?", "", v).strip():
            return None
        v = v.strip() if "://" in v else "http://" + v.strip()
        if urlsplit(v).scheme not in ("http", "https") or not urlsplit(v).hostname:
            raise ValueError(f"proxy must be an http:// or https:// proxy address, not {v!r}")
        return v


@dataclass(frozen=True)
class Variable:
    key: str
    ref_text: str                      # as written, the key node_finished reports its value under
    ref: Ref | None
    value: Any                         # None, a literal, or a Template for text


@register("Invoke", InvokeParams, outputs=lambda p: {"result"})
class Invoke(Node):
    thoughts_text = "Sending the HTTP request and waiting for the answer."

    def prepare(self) -> None:
        p = self.params
        self.url = self.text_template(p.url)
        self.headers: dict[str, Any] = {}
        for name, value in p.headers.items():
            self.headers[str(name)] = self._header_template(str(name), value) if isinstance(value, str) else value
        self.variables: list[Variable] = []
        for i, item in enumerate(p.variables):
            where_ = f"params.variables.{i}"
            if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not item["key"]:
                raise NodeConfigError(f"{where_}.key", "each variable needs a key (the parameter name to send)")
            ref_text = str(item.get("ref") or "").strip()
            ref = bare_or_braced_ref(ref_text) if ref_text else None
            if ref_text and ref is None:
                raise NodeConfigError(f"{where_}.ref", f"ref must be a variable such as 'sys.query' or "
                                                       f"'Component:Id@key', not {ref_text!r}")
            value = item.get("value")
            if isinstance(value, str):
                value = self.text_template(value)
            self.variables.append(Variable(item["key"], ref_text, ref, value))

    def _header_template(self, name: str, text: str) -> list[str | Ref]:
        """A header value split into literal text and variables (`{token}` placeholders)."""
        parts: list[str | Ref] = []
        pos = 0
        for m in HEADER_PLACEHOLDER.finditer(text):
            expr = m.group(1)
            if "@" not in expr and not expr.startswith(("sys.", "env.")):
                raise NodeConfigError("params.headers", f"{{{expr}}} in the header {name!r} is not a variable: "
                                      "write {sys.name}, {env.name} or {component_id@output}")
            parts += [text[pos:m.start()], parse_ref(expr)]
            pos = m.end()
        parts.append(text[pos:])
        return [part for part in parts if part != ""]

    def references(self):
        found = [("params.url", r) for r in self.url.refs]
        for value in self.headers.values():
            if isinstance(value, list):
                found += [("params.headers", part) for part in value if isinstance(part, Ref)]
        for i, v in enumerate(self.variables):
            if v.ref is not None:
                found.append((f"params.variables.{i}.ref", v.ref))
            if isinstance(v.value, Template):
                found += [(f"params.variables.{i}.value", r) for r in v.value.refs]
        return found

    # --- run time ------------------------------------------------------------------------
    async def run(self, state, ctx) -> Result:
        import httpx
        state, writes = await settle_pending(self, [r for _, r in self.references()], state, ctx)
        p = self.params
        args, inputs = self._arguments(state)
        url = render(self.url, state, spliced=True, to_text=as_python_text)
        if not url.startswith(("http://", "https://")):
            url = "http://" + url
        headers = {name: "".join(part if isinstance(part, str) else as_python_text(resolve(state, part))
                                 for part in value) if isinstance(value, list) else str(value)
                   for name, value in self.headers.items()}
        request: dict[str, Any] = {"headers": headers}
        if p.method == "get":
            # after the URL's own query parameters, as RAGFlow's client adds them (httpx would replace them)
            request["params"] = parse_qsl(urlsplit(url).query, keep_blank_values=True) + pairs(args)
        elif p.datatype == "json":
            request["json"] = args
        else:
            request["data"] = dict_of_lists(pairs(args))
        attempts = p.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                response = await send(p.method.upper(), url, request, p, ctx)
                break
            except retried() as e:
                if attempt == attempts:
                    tries = f" ({attempts} attempts)" if attempts > 1 else ""
                    raise InvokeError(describe(e, url, p.timeout) + tries) from None
                await asyncio.sleep(p.delay_after_error)
            except httpx.HTTPError as e:          # a bad header value, an undecodable answer: no retry helps
                raise InvokeError(f"the request to {where(url)} failed: {e or type(e).__name__}") from None
        text = response.text
        return Result(outputs={"result": html_text(text) if p.clean_html else text}, inputs=inputs, writes=writes)

    def _arguments(self, state) -> tuple[dict[str, Any], dict[str, Any]]:
        args: dict[str, Any] = {}
        inputs: dict[str, Any] = {}
        for v in self.variables:
            value = resolve(state, v.ref) if v.ref is not None else None
            if value is None:
                if isinstance(v.value, Template):
                    value = render(v.value, state, spliced=True, to_text=as_python_text)
                elif v.value is not None:
                    value = v.value
                else:
                    value = ""
            if self.params.datatype == "json":
                value = json_value(v.key, value)
            args[v.key] = value
            if v.ref_text:
                inputs[v.ref_text] = value
        return args, inputs


def json_value(key: str, value: Any) -> Any:
    """In JSON mode a text holding JSON is sent as that value, so a variable can carry an object."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise InvokeError(f"the variable {key!r} cannot be sent as JSON: {value!r}") from None
    return value


def pairs(args: dict[str, Any]) -> list[tuple[str, str]]:
    """Query or form fields as RAGFlow's HTTP client encodes them: a list repeats its key, None is left
    out, numbers and booleans become their text (objects are sent as JSON text)."""
    out: list[tuple[str, str]] = []
    for key, value in args.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item is None:
                continue
            out.append((key, item if isinstance(item, str) else
                        json.dumps(item, ensure_ascii=False) if isinstance(item, dict) else str(item)))
    return out


def dict_of_lists(items: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in items:
        out.setdefault(key, []).append(value)
    return out


async def send(method: str, url: str, request: dict[str, Any], p: InvokeParams, ctx) -> httpx.Response:
    """The request through the host guard (every connection checked and pinned); the body is read up to MAX_BYTES."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvokeError(f"URL not valid: {url!r} is not an http:// or https:// address")
    import httpx
    guard = HostGuard.of("Invoke", ctx)
    async with httpx.AsyncClient(timeout=p.timeout, follow_redirects=False, transport=guard.transport(proxy=p.proxy),
                                 headers={"User-Agent": USER_AGENT}) as client:
        async with client.stream(method, url, **request) as response:
            body = bytearray()
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) > MAX_BYTES:
                    raise InvokeError(f"the answer of {where(url)} is larger than {MAX_BYTES // 1_000_000} MB")
            kept = [(k, v) for k, v in response.headers.multi_items()
                    if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(response.status_code, headers=kept, content=bytes(body), request=response.request)


def describe(error: Exception, url: str, timeout: float) -> str:
    import httpx
    if isinstance(error, httpx.TimeoutException):
        return f"{where(url)} did not answer within {timeout:g} s"
    return f"cannot reach {where(url)}: {error or type(error).__name__}"


def html_text(body: str) -> str:
    """An HTML answer as text: its title, then one line per block of the page, scripts and styles left out."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(body, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(DROPPED_TAGS):
        tag.decompose()
    lines = block_lines(soup, BLOCKS)
    return "\n".join(([title] if title else []) + [line for line in lines if line])

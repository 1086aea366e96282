"""What the web tools share: one HTTP request with clear errors, and results as citable chunks (API keys: keys.py).

Errors name the service and what went wrong, never a credential: keys travel in headers or query
strings, so messages carry the origin and path only, and any key that a server echoes back is masked.
Failures worth retrying (timeouts, lost connections, rate limits, 5xx) are `ServiceUnavailable`,
which is also a `ConnectionError`, so a tool running as a node is retried by its RetryPolicy
(`max_retries`), as an Agent tool by `Tool.call`.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable
from urllib.parse import urlsplit

from pydantic import field_validator

from canvas2graph.nodes.tool import ToolError, web_chunk
from canvas2graph.runtime.services.netguard import HostGuard

if TYPE_CHECKING:
    import httpx

USER_AGENT = "canvas2graph/0.1 (+https://github.com/infiniflow/ragflow canvas runner)"
TIMEOUT_ENV = "CANVAS2GRAPH_TOOL_TIMEOUT"
MAX_CHUNK_CHARS = 10000          # RAGFlow keeps the first 10,000 characters of each result
_INLINE_IMAGE = re.compile(r"!?\[[a-z]+\]\(data:image/png;base64,[ 0-9A-Za-z/_=+-]+\)")


class ServiceUnavailable(ToolError, ConnectionError):
    """The service timed out, could not be reached, was rate limited or failed (5xx): retrying may help."""


def timeout_for(default: float) -> float:
    """Seconds one request may take: `CANVAS2GRAPH_TOOL_TIMEOUT` when set, else the tool's default."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ToolError(f"{TIMEOUT_ENV} must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise ToolError(f"{TIMEOUT_ENV} must be positive, not {raw!r}")
    return value


def where(url: str) -> str:
    """scheme://host[:port]/path of a URL: enough to say where, without query strings that may hold keys."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def masked(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


async def request(service: str, method: str, url: str, *, timeout: float, params: dict | None = None,
                  json: Any = None, data: dict | None = None, headers: dict | None = None,
                  secrets: Iterable[str] = (), proxy: str | None = None, follow_redirects: bool = True,
                  max_bytes: int | None = None, raise_for_status: bool = True,
                  guard: HostGuard | None = None) -> httpx.Response:
    """One request; any failure becomes a ToolError that says what happened in plain words.

    With `max_bytes`, a longer body is refused while it arrives rather than read whole. Without
    `raise_for_status`, an error status comes back as a response, for services that explain their
    errors in a body shape of their own (the caller then reports them, e.g. with `status_error`).
    With a `guard` (a URL the DSL or the model chose), every connection, redirects and the proxy
    included, goes through the host guard, and the environment's proxy settings do not apply.
    """
    import httpx    # here, not at the top: `canvas2graph compile` loads every tool and sends nothing
    secrets = tuple(secrets)
    client_options: dict[str, Any] = {"transport": guard.transport(proxy=proxy)} if guard else {"proxy": proxy}
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=follow_redirects,
                                     headers={"User-Agent": USER_AGENT}, **client_options) as client:
            async with client.stream(method, url, params=params, json=json, data=data, headers=headers) as response:
                body = bytearray()
                async for piece in response.aiter_bytes():
                    body += piece
                    if max_bytes is not None and len(body) > max_bytes:
                        raise ToolError(f"{service}: {where(url)} is larger than {max_bytes // 1_000_000} MB")
                # the body is decoded already: its new Response must not claim a content encoding
                kept = [(k, v) for k, v in response.headers.multi_items()
                        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
                response = httpx.Response(response.status_code, headers=kept, content=bytes(body),
                                          request=response.request)
    except httpx.TimeoutException:
        raise ServiceUnavailable(f"{service} did not answer within {timeout:g} s ({where(url)})") from None
    except httpx.TransportError as e:
        reason = masked(str(e) or type(e).__name__, secrets)
        raise ServiceUnavailable(f"cannot reach {service} at {where(url)}: {reason}") from None
    except httpx.InvalidURL as e:
        raise ToolError(f"{service}: invalid URL {where(url)!r}: {e}") from None
    except httpx.RequestError as e:            # too many redirects, an undecodable body, ...
        raise ToolError(f"{service}: the request to {where(url)} failed: {masked(str(e), secrets)}") from None
    if raise_for_status and response.status_code >= 400:
        raise status_error(service, response, secrets)
    return response


def status_error(service: str, response: httpx.Response, secrets: Iterable[str] = (),
                 detail: str | None = None) -> ToolError:
    """An HTTP error status as a ToolError carrying the service's own explanation (`detail` when the
    caller read it from the body itself)."""
    status = response.status_code
    secrets = tuple(secrets)
    detail = masked(error_detail(response) if detail is None else detail, secrets)
    message = f"{service} answered HTTP {status} {response.reason_phrase}".rstrip()
    if status in (401, 403) and any(secrets):         # only services called with a key
        message += " (check the API key)"
    if detail:
        message += f": {detail}"
    retryable = status == 429 or status >= 500
    error = ServiceUnavailable(message) if retryable else ToolError(message)
    error.status = status
    return error


def error_detail(response: httpx.Response) -> str:
    """The explanation in an error body: `{"error": ...}`, `{"detail": {"error": ...}}`, `{"message": ...}` or text."""
    try:
        body = response.json()
    except ValueError:
        text = re.sub(r"<[^>]+>", " ", response.text or "")
        return " ".join(text.split())[:300]
    for key in ("detail", "error", "message", "msg"):
        value = body.get(key) if isinstance(body, dict) else None
        if isinstance(value, dict):
            value = value.get("error") or value.get("message") or value
        if value:
            return str(value)[:300]
    return str(body)[:300]


def json_body(service: str, response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "unknown content")
        raise ToolError(f"{service} answered with {kind} where JSON was expected ({where(str(response.url))})") from None


def web_chunks(items: Iterable[Any], *, title: Callable[[Any], Any], url: Callable[[Any], Any],
               content: Callable[[Any], Any], score: Callable[[Any], Any] | None = None) -> list[dict]:
    """Results as citable chunks, as RAGFlow's `_retrieve_chunks` keeps them: results without content
    are dropped, inline base64 images removed and each text cut at 10,000 characters."""
    chunks = []
    for item in items:
        text = content(item)
        if not text:
            continue
        text = _INLINE_IMAGE.sub("", str(text))[:MAX_CHUNK_CHARS]
        if not text:
            continue
        extra = {}
        if score is not None:
            value = score(item)
            if isinstance(value, (int, float)):
                extra = {"similarity": value, "vector_similarity": value, "term_similarity": value}
        chunks.append(web_chunk(title=str(title(item) or ""), url=str(url(item) or ""), content=text, **extra))
    return chunks


def one_of(field: str, allowed: tuple[str, ...]):
    """A params validator: `field` must be one of `allowed` (the message lists them)."""
    def check(cls, v: Any) -> Any:
        if v not in allowed:
            raise ValueError(f"{field} must be one of {', '.join(allowed)}, not {v!r}")
        return v
    return field_validator(field)(classmethod(check))


def text_arg(args: dict, name: str) -> str:
    """A string argument, whatever type a model or a reference gave it ("" for None)."""
    value = args.get(name)
    return "" if value is None else str(value).strip()


def list_arg(value: Any) -> list[str]:
    """A list argument that may come as a list, a comma-separated string, or nothing."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [str(value)]

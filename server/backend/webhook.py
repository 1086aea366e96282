"""Webhook triggers: what RAGFlow's Begin declares in `Webhook` mode, applied to an HTTP request.

An agent whose Begin has `mode: "Webhook"` runs when its webhook URL is called. Begin's params say
how (RAGFlow's editor writes them):

- `methods`: the HTTP methods accepted (all when empty);
- `security`: required. `auth_type` is `none` (then only with `allow_anonymous: true`), `token`
  (`token.token_header` must carry `token.token_value`), `basic` (`basic_auth.username`/`password`)
  or `jwt` (`Authorization: Bearer <JWT>` signed with `jwt.secret` by `jwt.algorithm`, HS256 by
  default, with `jwt.audience`, `jwt.issuer` and `jwt.required_claims` checked when set);
  `ip_whitelist` (addresses or CIDR ranges), `max_body_size` (`"1MB"`, `"512KB"`; 10MB at most
  and by default) and `rate_limit` (`{limit, per: second|minute|hour|day}`; 60 a minute by default);
- `content_types`: the one Content-Type accepted (others are refused);
- `schema`: `{query, headers, body}`, each a JSON schema (`properties` with types, `required`):
  the fields taken from the request, strings cast to the declared types;
- `execution_mode`: `Immediately` (the default) answers at once with `response` (`status`,
  `body_template`) and runs in the background; otherwise the call waits for the run and answers
  `{"message", "success", "code"}` with the status a Message's `status` gives (200 by default).

The run starts from Begin with outputs `query`, `headers` and `body` (the schema's fields, read as
`{begin@body.name}`), `sys.query` empty, and Begin reports the whole request as its input `request`.
Checks happen in RAGFlow's order; every refusal is an HTTP 400 with `{"code": 400, "message"}`.
"""
from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from canvas2graph.nodes.begin import WEBHOOK_INPUT

IMMEDIATELY = "Immediately"
MAX_BODY_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_BODY = "10MB"
DEFAULT_RATE = {"limit": 60, "per": "minute"}
RATE_WINDOWS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
SIZE_UNITS = {"kb": 1024, "mb": 1024 * 1024}
RESERVED_CLAIMS = {"exp", "sub", "aud", "iss", "nbf", "iat"}
REDACTED = "[redacted]"


class WebhookRefused(Exception):
    """The request is refused; `message` says why (RAGFlow answers these with HTTP 400, code 400)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message, self.status = message, status


@dataclass
class WebhookRequest:
    """The parts of an HTTP request a webhook reads (the server fills it; nothing here is HTTP-framework code)."""
    method: str
    client_ip: str
    headers: list[tuple[str, str]]
    query: list[tuple[str, str]]
    body: bytes = b""
    form: dict[str, str] | None = None          # the parsed form of a form-encoded or multipart body
    # a multipart body's file parts, stored in the run file store: {field: [entries]} (RAGFlow puts each
    # file part into the body under its field name, as the file's parsed content)
    files: dict[str, list[dict]] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()


def webhook_settings(dsl: Any) -> dict | None:
    """Begin's params when it is in Webhook mode, else None."""
    components = dsl.get("components") if isinstance(dsl, dict) else None
    found = None
    for entry in (components or {}).values():
        obj = entry.get("obj") if isinstance(entry, dict) else None
        if not isinstance(obj, dict) or str(obj.get("component_name", "")).lower() != "begin":
            continue
        params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
        if params.get("mode") == "Webhook":
            found = params
    return found


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}


# --- security -------------------------------------------------------------------------------------
def check_method(settings: dict, method: str) -> None:
    allowed = [str(m).upper() for m in settings.get("methods") or []]
    if allowed and method.upper() not in allowed:
        raise WebhookRefused(f"this webhook does not accept {method.upper()} requests (it accepts {', '.join(allowed)})")


def body_limit(security: dict) -> int:
    text = str(security.get("max_body_size") or DEFAULT_MAX_BODY).strip().lower()
    for suffix, factor in SIZE_UNITS.items():
        if text.endswith(suffix) and text[:-len(suffix)].strip().isdigit():
            limit = int(text[:-len(suffix)]) * factor
            break
    else:
        raise WebhookRefused(f"the webhook's security.max_body_size {security.get('max_body_size')!r} is not a size "
                             "such as \"1MB\" or \"512KB\"")
    if limit > MAX_BODY_BYTES:
        raise WebhookRefused("the webhook's security.max_body_size is over the largest allowed, 10MB")
    return limit


def check_body_size(security: dict, request: WebhookRequest) -> None:
    limit = body_limit(security)
    declared = request.header("content-length")
    size = max(len(request.body), int(declared) if declared and declared.isdigit() else 0)
    if size > limit:
        raise WebhookRefused(f"the request body ({size} bytes) is larger than this webhook accepts ({limit} bytes)")


def check_ip(security: dict, client_ip: str) -> None:
    rules = [str(r).strip() for r in security.get("ip_whitelist") or [] if str(r).strip()]
    if not rules:
        return
    try:
        address = ipaddress.ip_address(client_ip)
    except ValueError:
        raise WebhookRefused(f"the caller's address {client_ip!r} cannot be checked against the IP allow-list")
    for rule in rules:
        try:
            if "/" in rule:
                if address in ipaddress.ip_network(rule, strict=False):
                    return
            elif address == ipaddress.ip_address(rule):
                return
        except ValueError:
            raise WebhookRefused(f"the webhook's IP allow-list holds {rule!r}, which is neither an address nor a range")
    raise WebhookRefused(f"IP {client_ip} is not on this webhook's allow-list")


def rate_limit(security: dict) -> tuple[int, int]:
    """(requests, per seconds) of the webhook's rate limit."""
    settings = security.get("rate_limit") or DEFAULT_RATE
    if not isinstance(settings, dict):
        raise WebhookRefused("the webhook's security.rate_limit must be an object {limit, per}")
    try:
        limit = int(settings.get("limit", DEFAULT_RATE["limit"]))
    except (TypeError, ValueError):
        raise WebhookRefused("the webhook's security.rate_limit.limit must be a whole number")
    if limit <= 0:
        raise WebhookRefused("the webhook's security.rate_limit.limit must be greater than 0")
    per = settings.get("per", "minute")
    if per not in RATE_WINDOWS:
        raise WebhookRefused(f"the webhook's security.rate_limit.per must be one of {', '.join(RATE_WINDOWS)}, not {per!r}")
    return limit, RATE_WINDOWS[per]


def _same(given: Any, expected: Any) -> bool:
    return isinstance(given, str) and isinstance(expected, str) and hmac.compare_digest(given.encode(), expected.encode())


def check_token(security: dict, request: WebhookRequest) -> None:
    settings = security.get("token") if isinstance(security.get("token"), dict) else {}
    header, value = settings.get("token_header"), settings.get("token_value")
    if not header or not value:
        raise WebhookRefused("the webhook's token authentication has no security.token.token_header and token_value")
    if not _same(request.header(str(header)), str(value)):
        raise WebhookRefused("invalid token: the request's token does not match this webhook's")


def check_basic(security: dict, request: WebhookRequest) -> None:
    settings = security.get("basic_auth") if isinstance(security.get("basic_auth"), dict) else {}
    username, password = settings.get("username"), settings.get("password")
    if username is None or password is None:
        raise WebhookRefused("the webhook's basic authentication has no security.basic_auth.username and password")
    header = request.header("authorization") or ""
    if header[:6].lower() != "basic ":
        raise WebhookRefused("invalid Basic Auth credentials: send `Authorization: Basic <base64 of user:password>`")
    try:
        user, _, secret = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise WebhookRefused("invalid Basic Auth credentials: the header is not base64 of user:password")
    if not (_same(user, str(username)) & _same(secret, str(password))):
        raise WebhookRefused("invalid Basic Auth credentials")


def check_jwt(security: dict, request: WebhookRequest) -> dict:
    import jwt

    settings = security.get("jwt") if isinstance(security.get("jwt"), dict) else {}
    secret = settings.get("secret")
    if not secret:
        raise WebhookRefused("the webhook's JWT authentication has no security.jwt.secret")
    header = request.header("authorization") or ""
    if header[:7].lower() != "bearer ":
        raise WebhookRefused("missing Bearer token: send `Authorization: Bearer <JWT>`")
    token = header[7:].strip()
    if not token:
        raise WebhookRefused("empty Bearer token")
    algorithm = str(settings.get("algorithm") or "HS256").upper()
    if algorithm == "NONE":
        raise WebhookRefused("the webhook's JWT algorithm is `none`: unsigned tokens are never accepted")
    claims = settings.get("required_claims") or []
    claims = [claims] if isinstance(claims, str) else list(claims) if isinstance(claims, (list, tuple, set)) else []
    claims = [c for c in claims if isinstance(c, str) and c.strip()]
    reserved = sorted(set(claims) & RESERVED_CLAIMS)
    if reserved:
        raise WebhookRefused(f"the webhook requires the registered claim {reserved[0]!r}; set jwt.audience or "
                             "jwt.issuer for those instead")
    options = {"verify_aud": bool(settings.get("audience")), "verify_iss": bool(settings.get("issuer"))}
    try:
        decoded = jwt.decode(token, key=secret, algorithms=[algorithm], options=options,
                             audience=settings.get("audience") or None, issuer=settings.get("issuer") or None)
    except Exception as e:      # noqa: BLE001 - PyJWT's errors (and a key that is not one) all mean "refused"
        raise WebhookRefused(f"invalid JWT: {e}")
    missing = [c for c in claims if c not in decoded]
    if missing:
        raise WebhookRefused(f"the JWT lacks the claim {missing[0]!r} this webhook requires")
    return decoded


AUTH_CHECKS = {"token": check_token, "basic": check_basic, "jwt": check_jwt}


async def check_security(settings: dict, request: WebhookRequest, take_token: Callable[[int, int], Awaitable[bool]]
                         ) -> None:
    """Body size, IP allow-list, rate limit, authentication: RAGFlow's checks, in its order.
    `take_token(limit, per_seconds)` takes one request from the webhook's rate-limit bucket."""
    security = settings.get("security")
    if not isinstance(security, dict) or not security:
        raise WebhookRefused("this webhook has no security settings: set security.auth_type (or allow_anonymous "
                             "to accept calls without credentials)")
    check_body_size(security, request)
    check_ip(security, request.client_ip)
    limit, per = rate_limit(security)
    if not await take_token(limit, per):
        raise WebhookRefused(f"too many requests: this webhook accepts {limit} per {per} s", status=429)
    auth = security.get("auth_type", "none")
    if auth == "none":
        if not _truthy(security.get("allow_anonymous")):
            raise WebhookRefused("this webhook needs credentials: anonymous calls are accepted only with "
                                 "security.allow_anonymous set to true")
        return
    check = AUTH_CHECKS.get(auth)
    if check is None:
        raise WebhookRefused(f"the webhook's security.auth_type {auth!r} is not one of none, token, basic, jwt")
    check(security, request)


# --- the request as the run sees it -----------------------------------------------------------------
def parse_request(settings: dict, request: WebhookRequest) -> dict:
    """{query, headers, body, content_type}: what RAGFlow hands the run as Begin's input `request`.

    Credentials (Authorization, the token header) are replaced by "[redacted]": they would otherwise
    be stored with the session and shown in its events."""
    expected = str(settings.get("content_types") or "").split(";")[0].strip().lower()
    ctype = request.content_type
    if ctype and expected and ctype != expected:
        raise WebhookRefused(f"invalid Content-Type: this webhook accepts {expected!r}, not {ctype!r}")
    query: dict[str, str] = {}
    for key, value in request.query:
        query.setdefault(key, value)
    security = settings.get("security") if isinstance(settings.get("security"), dict) else {}
    secret_headers = {"authorization", str((security.get("token") or {}).get("token_header") or "").lower()}
    headers = {k: (REDACTED if k.lower() in secret_headers else v) for k, v in request.headers}
    return {"query": query, "headers": headers, "body": _body(ctype, request), "content_type": ctype}


def _body(ctype: str, request: WebhookRequest) -> Any:
    if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return {**(request.form or {}), **request.files}
    if not request.body.strip():
        return {}
    try:
        return json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        if ctype == "application/json":
            raise WebhookRefused(f"the request body is not valid JSON: {e}")
        return {}       # text, octet-stream, ...: RAGFlow reads JSON when it is JSON, nothing otherwise


def _default(kind: str) -> Any:
    if kind == "file" or kind.startswith("array"):
        return []
    return {"object": {}, "boolean": False, "number": 0, "string": ""}.get(kind)


def _cast(value: Any, kind: str, where: str) -> Any:
    """A string cast to the declared type, as RAGFlow's webhook casts query and form values."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind == "boolean":
        if text.lower() in ("true", "1"):
            return True
        if text.lower() in ("false", "0"):
            return False
        raise WebhookRefused(f"{where}: {value!r} is not a boolean (true, false, 1 or 0)")
    if kind == "number":
        try:
            return int(text) if text.lstrip("-").isdigit() else float(text)
        except ValueError:
            raise WebhookRefused(f"{where}: {value!r} is not a number")
    if kind == "object" or kind.startswith("array"):
        want = dict if kind == "object" else list
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, want):
            raise WebhookRefused(f"{where}: {value!r} is not a JSON {'object' if want is dict else 'array'}")
        return parsed
    return value


def _is(value: Any, kind: str) -> bool:
    if kind == "file":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind.startswith("array"):
        if not isinstance(value, list):
            return False
        inner = kind[kind.find("<") + 1:kind.find(">")] if "<" in kind and ">" in kind else ""
        return all(_is(item, inner) for item in value) if inner else True
    return True


def extract(data: Any, schema: Any, section: str, *, any_case: bool = False) -> dict:
    """The fields `schema` declares, taken from `data`: required ones must be there, the others get
    their type's empty value, strings are cast to the declared type. `any_case`: keys match whatever
    their case (header names)."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    data = data if isinstance(data, dict) else {}
    lookup = {str(k).lower(): k for k in data} if any_case else {}
    out: dict[str, Any] = {}
    for name, spec in properties.items():
        kind = str((spec or {}).get("type") or "").lower() if isinstance(spec, dict) else ""
        key = lookup.get(name.lower(), name) if any_case else name
        if key not in data:
            if name in required:
                raise WebhookRefused(f"{section} lacks the required field {name!r}")
            out[name] = _default(kind)
            continue
        value = _cast(data[key], kind, f"{section}.{name}")
        if kind and not _is(value, kind):
            raise WebhookRefused(f"{section}.{name} must be {kind}, not {type(value).__name__}")
        out[name] = value
    return out


def run_payload(settings: dict, parsed: dict) -> dict:
    """What Begin receives: the schema's fields of each part, and the parsed request as `input`."""
    schema = settings.get("schema") if isinstance(settings.get("schema"), dict) else {}
    return {"query": extract(parsed["query"], schema.get("query"), "query"),
            "headers": extract(parsed["headers"], schema.get("headers"), "headers", any_case=True),
            "body": extract(parsed["body"], schema.get("body"), "body"),
            "input": parsed}


def run_inputs(payload: dict) -> dict:
    """The request `inputs` that hand a webhook payload to Begin."""
    return {WEBHOOK_INPUT: payload}


def immediate_response(settings: dict) -> tuple[int, bytes, str]:
    """(status, body, content type) of an `Immediately` webhook's answer: `response.status` (200 to
    399) and `response.body_template`, sent as JSON when it is JSON, as text otherwise."""
    response = settings.get("response") if isinstance(settings.get("response"), dict) else {}
    status = response.get("status", 200)
    try:
        status = int(status)
    except (TypeError, ValueError):
        raise WebhookRefused(f"the webhook's response.status {status!r} is not a number")
    if not 200 <= status <= 399:
        raise WebhookRefused(f"the webhook's response.status {status} must be between 200 and 399")
    template = response.get("body_template") or ""
    if not template:
        return status, b"null", "application/json"
    try:
        return status, json.dumps(json.loads(template), ensure_ascii=False).encode(), "application/json"
    except (TypeError, ValueError):
        return status, str(template).encode(), "text/plain; charset=utf-8"


def is_immediate(settings: dict) -> bool:
    return (settings.get("execution_mode") or IMMEDIATELY) == IMMEDIATELY

"""RAGFlow's sandbox executor manager as a remote code runner.

The API (RAGFlow `agent/sandbox/executor_manager`): `POST <endpoint>/run` with
`{"code_b64": <base64 of the script>, "language": "python"|"nodejs", "arguments": {...}}`, answered
with `{"status", "stdout", "stderr", "exit_code", "detail", "time_used_ms", "memory_used_kb",
"resource_limit_type", "artifacts": [{"name", "mime_type", "size", "content_b64"}],
"result": {"present", "value", "type": "json"}}`. The manager wants its API token as
`Authorization: Bearer <token>` (or `X-Sandbox-Token`). The manager enforces its own time limit;
this client waits that long plus a margin for the reply.
"""
from __future__ import annotations

import base64
from typing import Any


from canvas2graph.runtime.services.sandbox.policy import CodePolicy
from canvas2graph.runtime.services.sandbox.types import LIMIT_EXCEEDED, Execution

REPLY_MARGIN = 15.0     # seconds beyond the execution limit: container allocation and artifact collection


class SandboxUnavailable(Exception):
    """The remote sandbox could not be reached or did not answer as the API says."""


def run_url(endpoint: str) -> str:
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/run") else endpoint + "/run"


def request_body(language: str, code: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"code_b64": base64.b64encode(code.encode("utf-8")).decode("ascii"), "language": language,
            "arguments": arguments}


async def run_remote(language: str, code: str, arguments: dict[str, Any], policy: CodePolicy) -> Execution:
    import httpx    # here, not at the top: `canvas2graph compile` loads CodeExec and sends nothing
    url = run_url(policy.sandbox_url)
    headers = {"Authorization": f"Bearer {policy.sandbox_token}"} if policy.sandbox_token else {}
    wait = policy.timeout + REPLY_MARGIN
    try:
        async with httpx.AsyncClient(timeout=wait) as client:
            reply = await client.post(url, json=request_body(language, code, arguments), headers=headers)
    except httpx.TimeoutException:
        return Execution(LIMIT_EXCEEDED, stderr=f"the code sandbox at {url} did not answer within {wait:g} s",
                         exit_code=-1, limit="time")
    except httpx.HTTPError as e:
        raise SandboxUnavailable(f"cannot reach the code sandbox at {url}: {e or type(e).__name__}") from None
    if reply.status_code != 200:
        raise SandboxUnavailable(f"the code sandbox at {url} answered HTTP {reply.status_code}: {reply.text[:500]}")
    try:
        body = reply.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise SandboxUnavailable(f"the code sandbox at {url} answered something other than a JSON object")
    return Execution.from_wire(body)

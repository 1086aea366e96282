"""API keys of the web tools: from the DSL's params, else from an environment variable.

A tool that cannot run without a key reports a missing one naming both places (`api_key`); a tool for
which the key is optional (a higher rate limit, a private repository) takes whichever is there
(`given_key`). Several RAGFlow tools ship `"xxx"` as the key's default: a blank for the user to fill,
which those tools pass as `placeholder` so that it counts as no key and the environment's applies.
"""
from __future__ import annotations

import os
from typing import Any

from canvas2graph.nodes.tool import ToolError

PLACEHOLDER = "xxx"         # RAGFlow's default for DeepL's, Jin10's, QWeather's and TuShare's key


def given_key(value: Any, env_var: str, placeholder: str = "") -> str:
    """The key from the DSL (`placeholder` counting as none), else from the environment; "" when neither."""
    key = str(value).strip() if value else ""
    if key == placeholder:
        key = ""
    return key or os.environ.get(env_var, "").strip()


def api_key(value: Any, env_var: str, service: str, field: str = "api_key", *, what: str = "an API key",
            placeholder: str = "") -> str:
    """The key from the DSL, else from the environment; a missing key is a clear error naming both."""
    key = given_key(value, env_var, placeholder)
    if not key:
        raise ToolError(f"{service} needs {what}: set params.{field} in the DSL or the {env_var} environment variable")
    return key

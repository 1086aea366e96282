"""The models this server can run, for the canvas editor's model picker (GET /api/v1/models).

What it answers: the server's default model (`--default-llm`, given to components saved with an empty
`llm_id`), the providers it knows (the built-in ones and the models config's) with whether each has its
API key here, the models the tenant's agents already name, and, when the server runs with `--llm-script`,
the scripted model (the script then answers every model, whatever its name). The picker offers these and
still takes any `model@Factory`; nothing here is a secret: a key is reported as present or not, never shown.
"""
from __future__ import annotations

import os
from typing import Any, Iterator

from fastapi import APIRouter, Depends, Request

from canvas2graph.types import SCRIPTED_LLM
from canvas2graph.runtime.services.models import MODELS_CONFIG_ENV, BUILTIN_PROVIDERS, ModelConfigError, load_providers, parse_llm_id
from canvas2graph.server.auth import tenant
from canvas2graph.server.deps import store
from canvas2graph.server.errors import ok

router = APIRouter(prefix="/api/v1", tags=["models"])

# what the picker offers for a server started with --llm-script (the name `run --llm-script` gives empty
# llm_ids): the script answers whatever model is named
SCRIPTED_MODEL = SCRIPTED_LLM
_AGENTS_READ = 500          # the tenant's agents read for the models they name (the most recently updated)


def llm_ids_in(value: Any) -> Iterator[str]:
    """Every non-empty `llm_id` string anywhere in a DSL (components, an Agent's tools and sub-agents)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "llm_id" and isinstance(item, str) and item.strip():
                yield item.strip()
            else:
                yield from llm_ids_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from llm_ids_in(item)


def _providers(config_path: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """[{name, has_key, key_env, key_required, configured}] and the models config's problem, if any."""
    builtin = {p.name.lower() for p in BUILTIN_PROVIDERS}
    try:
        providers = load_providers(config_path)
    except ModelConfigError as e:        # the server started, so it only matters to the scripted runs
        return [], e.message
    out = []
    for key, p in sorted(providers.items(), key=lambda kv: kv[1].name.lower()):
        has_key = bool((p.api_key_env and (os.environ.get(p.api_key_env) or "").strip()) or p.api_key)
        out.append({"name": p.name, "has_key": has_key, "key_env": p.api_key_env, "key_required": p.key_required,
                    "configured": key not in builtin})
    return out, None


def _model_entry(llm_id: str, source: str) -> dict[str, Any]:
    model, factory = parse_llm_id(llm_id) if "@" in llm_id else (llm_id, "")
    return {"llm_id": llm_id, "model": model, "factory": factory, "source": source}


@router.get("/models", summary="The models this server can run: its default, its providers and their keys, the "
                               "models the tenant's agents name, the scripted model under --llm-script")
async def list_models(request: Request, tenant_id: str = Depends(tenant)):
    state = request.app.state
    config = state.run_services.config
    scripted = bool(config.llm_script)
    providers, problem = _providers(config.models_config or os.environ.get(MODELS_CONFIG_ENV))
    default = getattr(state, "default_llm", None) or None
    models: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(llm_id: str, source: str) -> None:
        if llm_id not in seen:
            seen.add(llm_id)
            models.append(_model_entry(llm_id, source))

    if default:
        add(default, "default")
    if scripted:
        add(SCRIPTED_MODEL, "script")
    agents, _ = await store(request).list_agents(tenant_id, page=1, page_size=_AGENTS_READ)
    for llm_id in sorted({i for a in agents for i in llm_ids_in((a.dsl or {}).get("components"))}, key=str.lower):
        add(llm_id, "agents")
    return ok({"default_llm": default, "scripted": scripted, "providers": providers, "models": models,
               "models_config_problem": problem})

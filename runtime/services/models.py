"""Resolve RAGFlow `llm_id`s ("gpt-4o@OpenAI", "qwen2.5:7b@Ollama") into LangChain chat models.

Every supported factory speaks the OpenAI chat-completions protocol, so one client class
(`langchain_openai.ChatOpenAI`) covers them all; a factory only contributes a base URL and
where its API key comes from. See docs/models.md for the user-facing description.

Precedence, for both base URL and key: environment variable > models config file > built-in default.
"""
from __future__ import annotations

import os
import re
import threading
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

DEFAULT_FACTORY = "OpenAI"
MODELS_CONFIG_ENV = "CANVAS2GRAPH_MODELS"
TIMEOUT_ENV = "CANVAS2GRAPH_LLM_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0

# Sent when a provider needs no key: the OpenAI client refuses to start without one, and
# leaving it unset would make ChatOpenAI fall back to OPENAI_API_KEY and leak that key
# to a local server.
_PLACEHOLDER_KEYS = {"ollama": "ollama"}
_DEFAULT_PLACEHOLDER_KEY = "EMPTY"  # the convention vLLM and LocalAI document


class ModelConfigError(Exception):
    """An `llm_id` cannot be turned into a model; the message says what to set."""

    def __init__(self, message: str, *, component_id: str | None = None, field: str = "llm_id"):
        self.component_id = component_id
        self.field = field
        self.message = f"{component_id}: {message}" if component_id else message
        super().__init__(self.message)


@dataclass(frozen=True)
class ProviderConfig:
    name: str                 # factory name as RAGFlow spells it
    base_url: str | None      # default; None means the user must supply one
    api_key_env: str | None   # where the key is read from
    api_key: str | None       # literal key from the config file (discouraged)
    key_required: bool
    base_url_env: str         # overrides base_url when set


def _builtin(name: str, prefix: str, base_url: str | None, key_required: bool = True) -> ProviderConfig:
    return ProviderConfig(
        name=name,
        base_url=base_url,
        api_key_env=f"{prefix}_API_KEY",
        api_key=None,
        key_required=key_required,
        base_url_env=f"{prefix}_BASE_URL",
    )


BUILTIN_PROVIDERS: tuple[ProviderConfig, ...] = (
    _builtin("OpenAI", "OPENAI", "https://api.openai.com/v1"),
    _builtin("DeepSeek", "DEEPSEEK", "https://api.deepseek.com/v1"),
    _builtin("Ollama", "OLLAMA", "http://localhost:11434/v1", key_required=False),
    _builtin("VLLM", "VLLM", None, key_required=False),
    _builtin("LocalAI", "LOCALAI", None, key_required=False),
    _builtin("Moonshot", "MOONSHOT", "https://api.moonshot.cn/v1"),
    _builtin("Tongyi-Qianwen", "DASHSCOPE", "https://dashscope.aliyuncs.com/compatible-mode/v1"),
    _builtin("ZHIPU-AI", "ZHIPUAI", "https://open.bigmodel.cn/api/paas/v4"),
    _builtin("OpenRouter", "OPENROUTER", "https://openrouter.ai/api/v1"),
    _builtin("OpenAI-API-Compatible", "OPENAI_API_COMPATIBLE", None, key_required=False),
)


def _parse(llm_id: str, component_id: str | None) -> tuple[str, str]:
    text = (llm_id or "").strip()
    if not text:
        raise ModelConfigError("llm_id is empty: choose a model for this component", component_id=component_id)
    if "@" not in text:
        return text, DEFAULT_FACTORY
    # Model names may themselves contain '@' (e.g. gateway aliases); factory names never do.
    model, _, factory = text.rpartition("@")
    if not model.strip() or not factory.strip():
        raise ModelConfigError(
            f"llm_id {llm_id!r} must look like 'model@Factory' (e.g. 'gpt-4o@OpenAI')", component_id=component_id
        )
    return model.strip(), factory.strip()


def parse_llm_id(llm_id: str) -> tuple[str, str]:
    """Split an `llm_id` into (model, factory) on the last '@'; no '@' means the OpenAI factory."""
    return _parse(llm_id, None)


def _config_error(path: Path, problem: str) -> ModelConfigError:
    return ModelConfigError(f"models config {str(path)!r}: {problem}", field=MODELS_CONFIG_ENV)


def _env_prefix(name: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")


_STR_KEYS = ("base_url", "api_key_env", "api_key", "base_url_env")


def load_providers(config_path: str | os.PathLike[str] | None) -> dict[str, ProviderConfig]:
    """Built-in providers merged with the optional TOML file, keyed by lower-cased factory name."""
    providers = {p.name.lower(): p for p in BUILTIN_PROVIDERS}
    if not config_path:
        return providers
    path = Path(config_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _config_error(path, f"cannot be read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise _config_error(path, f"is not valid TOML ({exc})") from exc

    unknown_top = set(data) - {"providers", "prices"}     # prices: read by evaluations (server/backend/agent_tests)
    if unknown_top:
        raise _config_error(path, f"unknown top-level key(s) {sorted(unknown_top)}; expected [providers.<Factory>]")
    tables = data.get("providers", {})
    if not isinstance(tables, dict):
        raise _config_error(path, "'providers' must be a table")

    for name, table in tables.items():
        if not isinstance(table, dict):
            raise _config_error(path, f"[providers.{name!r}] must be a table")
        # Reject typos such as 'api_key_var' loudly instead of silently ignoring them.
        unknown = set(table) - {*_STR_KEYS, "key_required"}
        if unknown:
            raise _config_error(
                path, f"[providers.{name!r}] has unknown key(s) {sorted(unknown)}; allowed: {[*_STR_KEYS, 'key_required']}"
            )
        for key in _STR_KEYS:
            if key in table and not isinstance(table[key], str):
                raise _config_error(path, f"[providers.{name!r}] {key} must be a string")
        if "key_required" in table and not isinstance(table["key_required"], bool):
            raise _config_error(path, f"[providers.{name!r}] key_required must be true or false")

        existing = providers.get(name.lower())
        if existing is not None:
            # Override only what the file names; keep the built-in spelling of the factory.
            providers[name.lower()] = replace(existing, **table)
        else:
            prefix = _env_prefix(name)
            providers[name.lower()] = ProviderConfig(
                name=name,
                base_url=table.get("base_url"),
                api_key_env=table.get("api_key_env"),
                api_key=table.get("api_key"),
                # A gateway that names a key variable presumably needs it: fail fast when unset.
                key_required=table.get("key_required", "api_key_env" in table),
                base_url_env=table.get("base_url_env", f"{prefix}_BASE_URL"),
            )
    return providers


@dataclass(frozen=True)
class _Resolved:
    model: str
    base_url: str
    api_key: str


# RAGFlow gen_conf key -> (ChatOpenAI argument, type). All five are native ChatOpenAI fields.
_GEN_CONF: dict[str, tuple[str, type]] = {
    "temperature": ("temperature", float),
    "top_p": ("top_p", float),
    "max_tokens": ("max_tokens", int),
    "presence_penalty": ("presence_penalty", float),
    "frequency_penalty": ("frequency_penalty", float),
}


def _gen_conf_kwargs(gen_conf: Mapping[str, Any] | None, component_id: str | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for key, value in (gen_conf or {}).items():
        if key not in _GEN_CONF or value is None:
            continue  # RAGFlow sends other knobs (e.g. *_enabled flags) that have no ChatOpenAI meaning
        arg, kind = _GEN_CONF[key]
        try:
            kwargs[arg] = kind(value)
        except (TypeError, ValueError):
            raise ModelConfigError(
                f"gen_conf {key}={value!r} is not a {kind.__name__}", component_id=component_id, field=key
            ) from None
    return kwargs


class ModelFactory:
    """Turns llm_ids into chat models; one instance per run, shared by every node."""

    def __init__(
        self,
        *,
        script: Any = None,
        config_path: str | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self._script = script
        self._env: Mapping[str, str] = os.environ if env is None else env
        # Load the config now so a broken file fails before any node runs.
        self._providers = load_providers(config_path or self._get_env(MODELS_CONFIG_ENV))
        self._cache: dict[tuple[Any, ...], BaseChatModel] = {}
        self._lock = threading.Lock()  # nodes may run in parallel threads

    @property
    def providers(self) -> Mapping[str, ProviderConfig]:
        return self._providers

    def _get_env(self, name: str | None) -> str | None:
        value = self._env.get(name) if name else None
        return (value.strip() or None) if value else None  # treat empty/blank as unset

    def _timeout(self) -> float:
        raw = self._get_env(TIMEOUT_ENV)
        if raw is None:
            return DEFAULT_TIMEOUT_S
        try:
            timeout = float(raw)
        except ValueError:
            timeout = -1.0
        if timeout <= 0:
            raise ModelConfigError(f"{TIMEOUT_ENV}={raw!r} must be a positive number of seconds", field=TIMEOUT_ENV)
        return timeout

    def _resolve(self, llm_id: str, component_id: str | None) -> _Resolved:
        model, factory = _parse(llm_id, component_id)
        provider = self._providers.get(factory.lower())
        if provider is None:
            known = ", ".join(sorted((p.name for p in self._providers.values()), key=str.lower))
            raise ModelConfigError(
                f"llm_id {llm_id!r} names unknown model factory {factory!r}; known factories: {known} "
                f"(add [providers.\"{factory}\"] to the models config to define it)",
                component_id=component_id,
            )

        base_url = self._get_env(provider.base_url_env) or provider.base_url
        if not base_url:
            raise ModelConfigError(
                f"llm_id {llm_id!r} needs a base URL: set {provider.base_url_env} (or base_url in the models config)",
                component_id=component_id,
            )

        api_key = self._get_env(provider.api_key_env) or provider.api_key
        if not api_key:
            if provider.key_required:
                how = (
                    f"set {provider.api_key_env} (or api_key_env in the models config)"
                    if provider.api_key_env
                    else "set api_key_env in the models config"
                )
                raise ModelConfigError(f"llm_id {llm_id!r} needs an API key: {how}", component_id=component_id)
            api_key = _PLACEHOLDER_KEYS.get(provider.name.lower(), _DEFAULT_PLACEHOLDER_KEY)
        return _Resolved(model=model, base_url=base_url, api_key=api_key)

    def check(self, llm_id: str, *, component_id: str | None = None) -> None:
        """Raise ModelConfigError if `llm_id` could not be built; builds no client."""
        if self._script is not None:
            return  # the script stands in for every model, so no provider settings are needed
        self._resolve(llm_id, component_id)
        self._timeout()

    def chat_model(
        self,
        llm_id: str,
        *,
        component_id: str | None = None,
        gen_conf: Mapping[str, Any] | None = None,
    ) -> BaseChatModel:
        kwargs = _gen_conf_kwargs(gen_conf, component_id)
        # Key on the mapped arguments so irrelevant gen_conf keys don't fragment the cache.
        key = (llm_id, component_id, frozenset(kwargs.items()))
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._cache[key] = self._build(llm_id, component_id, kwargs)
            return cached

    def _build(self, llm_id: str, component_id: str | None, kwargs: dict[str, Any]) -> BaseChatModel:
        # traces show whose model a call is: a Message streams an LLM's or Agent's generation in its own
        # node, so the node's component_id alone would name the Message (only tracers read this)
        metadata = {"llm_id": llm_id, **({"llm_component_id": component_id} if component_id else {})}
        if self._script is not None:
            from canvas2graph.runtime.services.scripted import ScriptedChatModel  # lazy: only runs with --llm-script need it

            return ScriptedChatModel(script=self._script, component_id=component_id, metadata=metadata)

        resolved = self._resolve(llm_id, component_id)
        from langchain_openai import ChatOpenAI  # lazy: importing the OpenAI SDK is slow

        return ChatOpenAI(
            model=resolved.model,
            base_url=resolved.base_url,
            api_key=resolved.api_key,
            stream_usage=True,  # token counts for RAGFlow's events also when streaming
            max_retries=0,      # retries are the graph's job; client retries would double them
            timeout=self._timeout(),
            metadata=metadata,
            **kwargs,
        )

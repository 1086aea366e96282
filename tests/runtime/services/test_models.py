"""canvas2graph.runtime.services.models: llm_id -> ChatOpenAI resolution. No test talks to a real provider."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

# The project is not installed into the venv; make the repo root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from langchain_openai import ChatOpenAI  # noqa: E402

from tests.openai_server import OpenAIServer  # noqa: E402
from canvas2graph.runtime.services.models import (  # noqa: E402
    ModelConfigError,
    ModelFactory,
    ProviderConfig,
    parse_llm_id,
)

KEYS = {
    "OPENAI_API_KEY": "sk-openai",
    "DEEPSEEK_API_KEY": "sk-deepseek",
    "MOONSHOT_API_KEY": "sk-moonshot",
    "DASHSCOPE_API_KEY": "sk-dashscope",
    "ZHIPUAI_API_KEY": "sk-zhipu",
    "OPENROUTER_API_KEY": "sk-openrouter",
}


def key_of(model: ChatOpenAI) -> str:
    return model.openai_api_key.get_secret_value()


# ---------------------------------------------------------------- parse_llm_id


@pytest.mark.parametrize(
    ("llm_id", "expected"),
    [
        ("gpt-4o@OpenAI", ("gpt-4o", "OpenAI")),
        ("qwen2.5:7b@Ollama", ("qwen2.5:7b", "Ollama")),
        ("a@b@OpenAI", ("a@b", "OpenAI")),
        ("gpt-4o", ("gpt-4o", "OpenAI")),
        ("  deepseek-chat@DeepSeek  ", ("deepseek-chat", "DeepSeek")),
        ("org/model-x@OpenAI-API-Compatible", ("org/model-x", "OpenAI-API-Compatible")),
    ],
)
def test_parse_llm_id(llm_id: str, expected: tuple[str, str]) -> None:
    assert parse_llm_id(llm_id) == expected


@pytest.mark.parametrize("llm_id", ["", "   ", "@OpenAI", "gpt-4o@", "@"])
def test_parse_llm_id_rejects_malformed(llm_id: str) -> None:
    with pytest.raises(ModelConfigError) as exc:
        parse_llm_id(llm_id)
    assert exc.value.field == "llm_id"
    assert exc.value.component_id is None


# ---------------------------------------------------------------- built-in providers


@pytest.mark.parametrize(
    ("factory", "base_url", "key"),
    [
        ("OpenAI", "https://api.openai.com/v1", "sk-openai"),
        ("DeepSeek", "https://api.deepseek.com/v1", "sk-deepseek"),
        ("Ollama", "http://localhost:11434/v1", "ollama"),
        ("Moonshot", "https://api.moonshot.cn/v1", "sk-moonshot"),
        ("Tongyi-Qianwen", "https://dashscope.aliyuncs.com/compatible-mode/v1", "sk-dashscope"),
        ("ZHIPU-AI", "https://open.bigmodel.cn/api/paas/v4", "sk-zhipu"),
        ("OpenRouter", "https://openrouter.ai/api/v1", "sk-openrouter"),
    ],
)
def test_builtin_provider_defaults(factory: str, base_url: str, key: str) -> None:
    model = ModelFactory(env=KEYS).chat_model(f"some-model@{factory}")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "some-model"
    assert model.openai_api_base == base_url
    assert key_of(model) == key


@pytest.mark.parametrize(
    ("factory", "url_env", "key_env", "placeholder"),
    [
        ("VLLM", "VLLM_BASE_URL", "VLLM_API_KEY", "EMPTY"),
        ("LocalAI", "LOCALAI_BASE_URL", "LOCALAI_API_KEY", "EMPTY"),
        ("OpenAI-API-Compatible", "OPENAI_API_COMPATIBLE_BASE_URL", "OPENAI_API_COMPATIBLE_API_KEY", "EMPTY"),
        ("Ollama", "OLLAMA_BASE_URL", "OLLAMA_API_KEY", "ollama"),
    ],
)
def test_self_hosted_providers_key_optional(factory: str, url_env: str, key_env: str, placeholder: str) -> None:
    env = {url_env: "http://gpu-box:8000/v1", "OPENAI_API_KEY": "sk-must-not-leak"}
    model = ModelFactory(env=env).chat_model(f"m@{factory}")
    assert model.openai_api_base == "http://gpu-box:8000/v1"
    assert key_of(model) == placeholder  # never the OpenAI key

    model = ModelFactory(env={**env, key_env: "sk-local"}).chat_model(f"m@{factory}")
    assert key_of(model) == "sk-local"


def test_factory_names_are_case_insensitive() -> None:
    model = ModelFactory(env=KEYS).chat_model("deepseek-chat@deepseek")
    assert model.openai_api_base == "https://api.deepseek.com/v1"
    model = ModelFactory(env={"VLLM_BASE_URL": "http://h/v1"}).chat_model("m@vllm")
    assert model.openai_api_base == "http://h/v1"


def test_llm_id_without_factory_uses_openai() -> None:
    model = ModelFactory(env=KEYS).chat_model("gpt-4o-mini")
    assert model.openai_api_base == "https://api.openai.com/v1"
    assert model.model_name == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("factory", "prefix"),
    [("OpenAI", "OPENAI"), ("DeepSeek", "DEEPSEEK"), ("Tongyi-Qianwen", "DASHSCOPE"), ("ZHIPU-AI", "ZHIPUAI")],
)
def test_env_overrides_base_url_and_key(factory: str, prefix: str) -> None:
    env = {**KEYS, f"{prefix}_BASE_URL": "https://proxy.example/v1", f"{prefix}_API_KEY": "sk-override"}
    model = ModelFactory(env=env).chat_model(f"m@{factory}")
    assert model.openai_api_base == "https://proxy.example/v1"
    assert key_of(model) == "sk-override"


def test_blank_env_value_counts_as_unset() -> None:
    env = {**KEYS, "DEEPSEEK_BASE_URL": "  "}
    assert ModelFactory(env=env).chat_model("m@DeepSeek").openai_api_base == "https://api.deepseek.com/v1"
    with pytest.raises(ModelConfigError):
        ModelFactory(env={"OPENAI_API_KEY": ""}).check("gpt-4o@OpenAI")


# ---------------------------------------------------------------- config file


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_config_overrides_builtin_provider(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
[providers.openai]
api_key_env = "MY_OPENAI_KEY"
base_url = "https://openai-proxy.internal/v1"
""",
    )
    factory = ModelFactory(config_path=path, env={"MY_OPENAI_KEY": "sk-mine", "OPENAI_API_KEY": "sk-ignored"})
    model = factory.chat_model("gpt-4o@OpenAI")
    assert model.openai_api_base == "https://openai-proxy.internal/v1"
    assert key_of(model) == "sk-mine"
    assert factory.providers["openai"] == ProviderConfig(
        name="OpenAI",
        base_url="https://openai-proxy.internal/v1",
        api_key_env="MY_OPENAI_KEY",
        api_key=None,
        key_required=True,
        base_url_env="OPENAI_BASE_URL",
    )
    # The environment still wins over the file.
    factory = ModelFactory(config_path=path, env={"MY_OPENAI_KEY": "k", "OPENAI_BASE_URL": "https://env/v1"})
    assert factory.chat_model("gpt-4o@OpenAI").openai_api_base == "https://env/v1"


def test_config_adds_provider_from_env_var_path(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
[providers."My-Gateway"]
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "GATEWAY_KEY"
""",
    )
    env = {"CANVAS2GRAPH_MODELS": path, "GATEWAY_KEY": "gw-key"}
    model = ModelFactory(env=env).chat_model("llama-3@My-Gateway")
    assert model.openai_api_base == "http://127.0.0.1:8000/v1"
    assert key_of(model) == "gw-key"
    assert model.model_name == "llama-3"
    # Derived base URL variable for the new factory.
    env["MY_GATEWAY_BASE_URL"] = "http://other:9000/v1"
    assert ModelFactory(env=env).chat_model("x@my-gateway").openai_api_base == "http://other:9000/v1"
    # Naming a key variable makes the key required.
    with pytest.raises(ModelConfigError, match="needs an API key: set GATEWAY_KEY"):
        ModelFactory(env={"CANVAS2GRAPH_MODELS": path}).check("llama-3@My-Gateway")


def test_config_literal_api_key(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[providers.DeepSeek]\napi_key = "sk-literal"\n')
    model = ModelFactory(config_path=path, env={}).chat_model("deepseek-chat@DeepSeek")
    assert key_of(model) == "sk-literal"
    # The environment variable still wins over the literal.
    model = ModelFactory(config_path=path, env={"DEEPSEEK_API_KEY": "sk-env"}).chat_model("deepseek-chat@DeepSeek")
    assert key_of(model) == "sk-env"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[providers.OpenAI\n", "not valid TOML"),
        ('[providers.OpenAI]\napi_key_var = "X"\n', "unknown key(s) ['api_key_var']"),
        ("[providers.OpenAI]\nbase_url = 3\n", "base_url must be a string"),
        ('[models.OpenAI]\nbase_url = "x"\n', "unknown top-level key"),
    ],
)
def test_bad_config_file(tmp_path: Path, text: str, needle: str) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(ModelConfigError) as exc:
        ModelFactory(config_path=path, env={})
    assert needle in str(exc.value)
    assert exc.value.field == "CANVAS2GRAPH_MODELS"


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="cannot be read"):
        ModelFactory(config_path=str(tmp_path / "nope.toml"), env={})


# ---------------------------------------------------------------- errors


def test_missing_key_message() -> None:
    with pytest.raises(ModelConfigError) as exc:
        ModelFactory(env={}).chat_model("gpt-4o@OpenAI", component_id="LLM:Answer")
    assert str(exc.value) == (
        "LLM:Answer: llm_id 'gpt-4o@OpenAI' needs an API key: set OPENAI_API_KEY (or api_key_env in the models config)"
    )
    assert exc.value.component_id == "LLM:Answer"
    assert exc.value.field == "llm_id"


def test_unknown_factory_lists_known_ones() -> None:
    with pytest.raises(ModelConfigError) as exc:
        ModelFactory(env=KEYS).check("m@Nowhere", component_id="Agent:Bot")
    message = str(exc.value)
    assert message.startswith("Agent:Bot: ")
    assert "'Nowhere'" in message
    for name in ("OpenAI", "DeepSeek", "Ollama", "VLLM", "LocalAI", "OpenAI-API-Compatible", "ZHIPU-AI"):
        assert name in message


@pytest.mark.parametrize(
    ("factory", "variable"),
    [("VLLM", "VLLM_BASE_URL"), ("OpenAI-API-Compatible", "OPENAI_API_COMPATIBLE_BASE_URL"), ("LocalAI", "LOCALAI_BASE_URL")],
)
def test_missing_base_url(factory: str, variable: str) -> None:
    with pytest.raises(ModelConfigError) as exc:
        ModelFactory(env=KEYS).chat_model(f"m@{factory}", component_id="LLM:0")
    assert str(exc.value) == (
        f"LLM:0: llm_id 'm@{factory}' needs a base URL: set {variable} (or base_url in the models config)"
    )


def test_empty_llm_id() -> None:
    with pytest.raises(ModelConfigError) as exc:
        ModelFactory(env=KEYS).chat_model("", component_id="LLM:0")
    assert exc.value.component_id == "LLM:0"
    assert "empty" in str(exc.value)


def test_check_builds_nothing_and_fails_fast() -> None:
    factory = ModelFactory(env=KEYS)
    factory.check("gpt-4o@OpenAI")
    assert factory._cache == {}
    with pytest.raises(ModelConfigError, match="DEEPSEEK_API_KEY"):
        ModelFactory(env={}).check("deepseek-chat@DeepSeek", component_id="LLM:0")


def test_bad_timeout() -> None:
    with pytest.raises(ModelConfigError, match="CANVAS2GRAPH_LLM_TIMEOUT"):
        ModelFactory(env={**KEYS, "CANVAS2GRAPH_LLM_TIMEOUT": "soon"}).chat_model("gpt-4o")


# ---------------------------------------------------------------- client settings


def test_gen_conf_mapping_and_client_settings() -> None:
    gen_conf = {
        "temperature": 0.2,
        "top_p": "0.9",
        "max_tokens": 512,
        "presence_penalty": 0.4,
        "frequency_penalty": 0.7,
        "temperatureEnabled": True,  # RAGFlow UI flag: ignored
    }
    model = ModelFactory(env=KEYS).chat_model("gpt-4o@OpenAI", gen_conf=gen_conf)
    assert model.temperature == 0.2
    assert model.top_p == 0.9
    assert model.max_tokens == 512
    assert model.presence_penalty == 0.4
    assert model.frequency_penalty == 0.7
    assert model.stream_usage is True
    assert model.max_retries == 0
    assert model.request_timeout == 600.0


def test_gen_conf_defaults_and_timeout_env() -> None:
    model = ModelFactory(env={**KEYS, "CANVAS2GRAPH_LLM_TIMEOUT": "30"}).chat_model("gpt-4o")
    assert model.request_timeout == 30.0
    assert model.max_tokens is None
    assert model.presence_penalty is None


def test_gen_conf_bad_value() -> None:
    with pytest.raises(ModelConfigError) as exc:
        ModelFactory(env=KEYS).chat_model("gpt-4o", component_id="LLM:0", gen_conf={"max_tokens": "lots"})
    assert exc.value.field == "max_tokens"


def test_models_are_cached() -> None:
    factory = ModelFactory(env=KEYS)
    a = factory.chat_model("gpt-4o@OpenAI", component_id="LLM:0", gen_conf={"temperature": 0.1})
    assert factory.chat_model("gpt-4o@OpenAI", component_id="LLM:0", gen_conf={"temperature": 0.1}) is a
    # Keys irrelevant to the client do not create a new instance.
    assert factory.chat_model("gpt-4o@OpenAI", component_id="LLM:0", gen_conf={"temperature": 0.1, "x": 1}) is a
    assert factory.chat_model("gpt-4o@OpenAI", component_id="LLM:0", gen_conf={"temperature": 0.2}) is not a
    assert factory.chat_model("gpt-4o@OpenAI", component_id="LLM:1", gen_conf={"temperature": 0.1}) is not a
    assert factory.chat_model("gpt-4o-mini@OpenAI", component_id="LLM:0", gen_conf={"temperature": 0.1}) is not a
    assert ModelFactory(env=KEYS).chat_model("gpt-4o@OpenAI", component_id="LLM:0", gen_conf={"temperature": 0.1}) is not a


# ---------------------------------------------------------------- scripted models


def test_script_replaces_every_model() -> None:
    scripted = pytest.importorskip("canvas2graph.runtime.services.scripted")
    script = scripted.Script.load(["hello from the script"])
    factory = ModelFactory(script=script, env={})  # no keys at all
    factory.check("m@Nowhere")
    model = factory.chat_model("gpt-4o@OpenAI", component_id="LLM:Answer", gen_conf={"temperature": 0.3})
    assert isinstance(model, scripted.ScriptedChatModel)
    assert model.script is script
    assert model.component_id == "LLM:Answer"
    assert factory.chat_model("gpt-4o@OpenAI", component_id="LLM:Answer", gen_conf={"temperature": 0.3}) is model
    assert model.invoke("hi").content == "hello from the script"


# ---------------------------------------------------------------- a real HTTP round trip


ANSWER = "Hello from the fake server"


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with OpenAIServer([ANSWER, ANSWER]) as server:
        yield server


def test_round_trip_against_local_server(fake_server: OpenAIServer) -> None:
    env = {"OPENAI_API_COMPATIBLE_BASE_URL": fake_server.url, "OPENAI_API_COMPATIBLE_API_KEY": "sk-local"}
    model = ModelFactory(env=env).chat_model(
        "my-model@OpenAI-API-Compatible", component_id="LLM:0", gen_conf={"temperature": 0.5}
    )

    reply = model.invoke("Say hello")
    assert reply.content == ANSWER
    assert reply.usage_metadata["total_tokens"] == 11

    chunks = list(model.stream("Say hello"))
    assert "".join(str(c.content) for c in chunks) == ANSWER
    assert sum((c.usage_metadata or {}).get("total_tokens", 0) for c in chunks) == 11

    plain, streamed = fake_server.requests
    assert plain["auth"] == "Bearer sk-local"
    assert plain["body"]["model"] == "my-model"
    assert plain["body"]["temperature"] == 0.5
    assert streamed["body"]["stream"] is True
    assert streamed["body"]["stream_options"] == {"include_usage": True}

"""GET /api/v1/models (server/routes/models.py): what the canvas editor's model picker offers."""
from __future__ import annotations

import copy
import json
import os

import httpx

from canvas2graph.types import SCRIPTED_LLM
from tests.server.helpers import REPO, Api, Server, make_token

ROUTER = json.loads((REPO / "fixtures/ui/support_router.json").read_text())


def test_the_picker_gets_the_default_model_the_script_the_providers_with_their_keys_and_the_tenant_s_models(tmp_path):
    db = str(tmp_path / "server.db")
    (tmp_path / "models.toml").write_text('[providers.Acme]\nbase_url = "https://acme.test/v1"\napi_key_env = "ACME_KEY"\n')
    env = {**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}, "ACME_KEY": "sk-test"}
    with Server(db, tmp_path, {"auto_reply": "x"}, "--default-llm", "qwen-plus@Tongyi-Qianwen",
                "--models", str(tmp_path / "models.toml"), env=env) as server:
        assert httpx.get(server.url + "/api/v1/models").json()["code"] == 109          # a token is needed
        alice, bob = Api(server, make_token(db, "alice")), Api(server, make_token(db, "bob"))
        mine = copy.deepcopy(ROUTER)
        mine["components"]["LLM:Legal"]["obj"]["params"]["llm_id"] = "deepseek-chat@DeepSeek"
        alice.agent(mine, "Support")
        bob.agent({**copy.deepcopy(ROUTER), "components": {**ROUTER["components"], "LLM:Sales": {
            **ROUTER["components"]["LLM:Sales"], "obj": {"component_name": "LLM", "params": {
                **ROUTER["components"]["LLM:Sales"]["obj"]["params"], "llm_id": "bobs-model@OpenAI"}}}}}, "Bob's")
        listed = alice.ok("GET", "/models")
    assert listed["default_llm"] == "qwen-plus@Tongyi-Qianwen" and listed["scripted"] is True
    by_id = {m["llm_id"]: m for m in listed["models"]}
    assert list(by_id)[:2] == ["qwen-plus@Tongyi-Qianwen", SCRIPTED_LLM]
    assert by_id["qwen-plus@Tongyi-Qianwen"]["source"] == "default" and by_id[SCRIPTED_LLM]["source"] == "script"
    assert by_id["deepseek-chat@DeepSeek"] == {"llm_id": "deepseek-chat@DeepSeek", "model": "deepseek-chat",
                                               "factory": "DeepSeek", "source": "agents"}
    assert "gpt-4o@OpenAI" in by_id and "bobs-model@OpenAI" not in by_id          # another tenant's agents stay theirs
    providers = {p["name"]: p for p in listed["providers"]}
    assert providers["Acme"] == {"name": "Acme", "has_key": True, "key_env": "ACME_KEY", "key_required": True, "configured": True}
    assert providers["OpenAI"]["has_key"] is False and providers["OpenAI"]["configured"] is False
    assert providers["Ollama"]["key_required"] is False
    assert "sk-test" not in json.dumps(listed)                                       # a key is never shown


def test_without_a_default_model_the_script_comes_first_and_empty_model_names_are_not_offered(tmp_path):
    db = str(tmp_path / "server.db")
    empty = copy.deepcopy(ROUTER)
    for cpn in empty["components"].values():
        if "llm_id" in cpn["obj"]["params"]:
            cpn["obj"]["params"]["llm_id"] = ""
    with Server(db, tmp_path, {"auto_reply": "x"}) as server:
        alice = Api(server, make_token(db, "alice"))
        alice.agent(empty, "No models yet")
        listed = alice.ok("GET", "/models")
    assert listed["default_llm"] is None
    assert [m["llm_id"] for m in listed["models"]] == [SCRIPTED_LLM]

"""DeepL: DeepL's REST API (`POST /v2/translate`), SPEC 3.17.

The key comes from `params.auth_key` or `DEEPL_AUTH_KEY` and travels in the `Authorization:
DeepL-Auth-Key` header. Keys of the free plan end in `:fx` and belong to `https://api-free.deepl.com`,
the others to `https://api.deepl.com` (`CANVAS2GRAPH_DEEPL_FREE_URL` and `CANVAS2GRAPH_DEEPL_URL` move
them). The translation is `formalized_content`.
"""
from __future__ import annotations

from typing import Any

from pydantic import field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint
from canvas2graph.nodes.tools._web import json_body, request, status_error, timeout_for
from canvas2graph.nodes.tools.keys import PLACEHOLDER, api_key

KEY_ENV = "DEEPL_AUTH_KEY"

# The languages RAGFlow's DeepLParam.check() accepts.
SOURCE_LANGS = ("AR", "BG", "CS", "DA", "DE", "EL", "EN", "ES", "ET", "FI", "FR", "HU", "ID", "IT", "JA", "KO",
                "LT", "LV", "NB", "NL", "PL", "PT", "RO", "RU", "SK", "SL", "SV", "TR", "UK", "ZH")
TARGET_LANGS = ("AR", "BG", "CS", "DA", "DE", "EL", "EN-GB", "EN-US", "ES", "ET", "FI", "FR", "HU", "ID", "IT",
                "JA", "KO", "LT", "LV", "NB", "NL", "PL", "PT-BR", "PT-PT", "RO", "RU", "SK", "SL", "SV", "TR",
                "UK", "ZH")


class DeepLParams(Params):
    auth_key: str | None = PLACEHOLDER
    source_lang: str = "ZH"
    target_lang: str = "EN-GB"

    @field_validator("source_lang")
    @classmethod
    def _source(cls, v: str) -> str:
        if v not in SOURCE_LANGS:
            raise ValueError(f"source_lang must be a DeepL source language code such as EN, DE or ZH, not {v!r}")
        return v

    @field_validator("target_lang")
    @classmethod
    def _target(cls, v: str) -> str:
        if v not in TARGET_LANGS:
            raise ValueError(f"target_lang must be a DeepL target language code such as EN-GB, DE or ZH, not {v!r}")
        return v


@register("DeepL", DeepLParams, outputs=lambda p: {"formalized_content"})
class DeepL(Tool):
    function_name = "deepl_translate"
    tool_description = "Translate a text with DeepL, between the languages this tool is configured for."
    args = {"query": ToolArg("string", "The text to translate, complete and unchanged.", required=True)}

    def thoughts(self, state) -> str:
        return f"Translating from {self.params.source_lang} to {self.params.target_lang} with DeepL."

    async def execute(self, args: dict, ctx) -> ToolOutput:
        text = _text_of(args.get("query"))
        if not text:
            return ToolOutput({"formalized_content": ""})
        key = api_key(self.params.auth_key, KEY_ENV, "DeepL", "auth_key", what="an auth key",
                      placeholder=PLACEHOLDER)
        base = (endpoint("deepl_free", "https://api-free.deepl.com") if key.endswith(":fx")
                else endpoint("deepl", "https://api.deepl.com"))
        response = await request("DeepL", "POST", f"{base}/v2/translate", timeout=timeout_for(30), secrets=[key],
                                 raise_for_status=False, headers={"Authorization": f"DeepL-Auth-Key {key}"},
                                 json={"text": [text], "source_lang": self.params.source_lang,
                                       "target_lang": self.params.target_lang})
        if response.status_code == 456:
            raise ToolError("DeepL answered HTTP 456: the character quota of this key is used up")
        if response.status_code >= 400:
            raise status_error("DeepL", response, [key])
        data = json_body("DeepL", response)
        translations = data.get("translations") if isinstance(data, dict) else None
        if not translations or not isinstance(translations, list):
            raise ToolError("DeepL answered without a translation")
        return ToolOutput({"formalized_content": "".join(str(t.get("text", "")) for t in translations)})


def _text_of(value: Any) -> str:
    """The text to translate; a list (a reference to an array) is joined with " - ", as RAGFlow joins its inputs."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " - ".join(str(v) for v in value if v is not None and str(v).strip()).strip()
    return str(value).strip()

"""Download info: what DocGenerator hands on (`download`, a JSON string) so a Message can offer the file.

A Message that shows a value carrying download info (a dict, a list of them, or their JSON text with
`doc_id`, `filename` and `mime_type`) does not print it: it collects it into its `downloads` output
and `message_end.downloads`, and shows "" in its place, unless the info asks to be shown
(`include_download_info_in_content`), as RAGFlow's Message does.
"""
from __future__ import annotations

import json
from typing import Any

from canvas2graph.runtime.graph.values import as_json_text

INCLUDE_FLAG = "include_download_info_in_content"


def is_download_info(value: Any) -> bool:
    return isinstance(value, dict) and all(k in value for k in ("doc_id", "filename", "mime_type"))


def extract_downloads(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        if not value.lstrip().startswith(("{", "[")):
            return []
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if is_download_info(value):
        return [value]
    if isinstance(value, list) and value and all(is_download_info(v) for v in value):
        return value
    return []


def _public(value: Any) -> Any:
    if isinstance(value, list):
        return [_public(v) for v in value]
    return {k: v for k, v in value.items() if k != INCLUDE_FLAG} if isinstance(value, dict) else value


def shown_text(value: Any, downloads: list[dict[str, Any]] | None = None) -> str:
    """How a Message (or DocGenerator's content) prints a value, collecting download info on the way."""
    found = extract_downloads(value)
    if not found:
        return as_json_text(value)
    if downloads is not None:
        downloads.extend(_public(v) for v in found)
    if any(v.get(INCLUDE_FLAG) for v in found):
        parsed = json.loads(value) if isinstance(value, str) else value
        return json.dumps(_public(parsed), ensure_ascii=False)
    return ""

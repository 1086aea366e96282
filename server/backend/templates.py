"""The agent templates canvas2graph ships (package data in canvas2graph/templates/), and the
`canvas2graph templates list|export|create` command.

Two sources: canvas2graph's own demo agents, and RAGFlow's agent templates (Apache-2.0, shipped
unchanged as data with their NOTICE and LICENSE). A template is found by its id (`c2g-support-desk`,
RAGFlow's `"41"`) or its file name (`support_desk`, `deep_research`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any


SOURCES = ("canvas2graph", "ragflow")


@dataclass(frozen=True)
class Template:
    id: str
    name: str                # the file name without .json
    source: str              # "canvas2graph" or "ragflow"
    document: dict           # {id, title, description, canvas_type, avatar?, dsl}

    @property
    def dsl(self) -> dict:
        return self.document.get("dsl") or {}

    def text(self, key: str, language: str = "en") -> str:
        """`title` or `description` in a language (RAGFlow's templates map language codes to text)."""
        value = self.document.get(key)
        if isinstance(value, dict):
            return str(value.get(language) or next(iter(value.values()), ""))
        return str(value or "")


def _folder():
    return resources.files("canvas2graph").joinpath("templates")


@lru_cache(maxsize=1)
def templates() -> tuple[Template, ...]:
    """Every shipped template, canvas2graph's first, each source in file-name order."""
    found = []
    for source in SOURCES:
        folder = _folder().joinpath(source)
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".json"):
                continue
            document = json.loads(entry.read_text(encoding="utf-8"))
            found.append(Template(id=str(document.get("id", entry.name[:-5])), name=entry.name[:-5], source=source,
                                  document=document))
    return tuple(found)


def find_template(key: str) -> Template | None:
    key = key.strip().lower()
    return next((t for t in templates() if key in (t.id.lower(), t.name.lower())), None)


def template_view(template: Template) -> dict[str, Any]:
    """A template as RAGFlow's `GET /agents/templates` lists one (CanvasTemplate.to_dict), plus its source."""
    doc = template.document
    return {"id": template.id, "avatar": doc.get("avatar"), "title": doc.get("title"),
            "description": doc.get("description"), "canvas_type": doc.get("canvas_type"),
            "canvas_types": doc.get("canvas_types") or ([doc["canvas_type"]] if doc.get("canvas_type") else []),
            "canvas_category": doc.get("canvas_category") or "agent_canvas", "dsl": template.dsl,
            "name": template.name, "source": template.source}

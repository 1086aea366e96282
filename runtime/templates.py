"""The agent templates canvas2graph ships (package data in canvas2graph/templates/), and the
`canvas2graph templates list|export|create` command.

Two sources: canvas2graph's own demo agents, and RAGFlow's agent templates (Apache-2.0, shipped
unchanged as data with their NOTICE and LICENSE). A template is found by its id (`c2g-support-desk`,
RAGFlow's `"41"`) or its file name (`support_desk`, `deep_research`).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from canvas2graph.types import UsageError

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


# --- the command ----------------------------------------------------------------------------------
def _template(key: str) -> Template:
    found = find_template(key)
    if found is None:
        names = ", ".join(t.name for t in templates())
        raise UsageError(f"no template {key!r}; the templates are: {names}")
    return found


def cmd_templates(args) -> int:
    if args.templates_command == "list":
        if args.format == "json":
            print(json.dumps([{"id": t.id, "name": t.name, "source": t.source, "title": t.text("title"),
                               "canvas_type": t.document.get("canvas_type")} for t in templates()],
                             ensure_ascii=False, indent=2))
        else:
            for t in templates():
                print(f"{t.name}\t{t.id}\t{t.source}\t{t.text('title')}")
        return 0
    template = _template(args.template)
    if args.templates_command == "export":
        text = json.dumps(template.dsl, ensure_ascii=False, indent=2) + "\n"
        if args.output in (None, "-"):
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text, encoding="utf-8")
        return 0
    import asyncio
    return asyncio.run(_create(template, args))


async def _create(template: Template, args) -> int:
    """Store the template as an agent of a tenant, with its first version (what `serve` then runs)."""
    from compiler.load import fill_default_llm
    from runtime.store import StoreError, open_store
    from runtime.versions import record_version

    dsl = fill_default_llm(template.dsl, args.default_llm) if args.default_llm else template.dsl
    title = args.title or template.text("title")
    try:
        async with open_store(args.db) as store:
            agent = await store.create_agent(args.tenant.strip(), title, dsl, template.text("description") or None,
                                             template.document.get("avatar"),
                                             canvas_type=template.document.get("canvas_type"))
            version = await record_version(store, agent, author=args.tenant.strip())
    except StoreError as e:
        raise UsageError(str(e))
    print(agent.id)
    problems = [d for d in version.diagnostics["diagnostics"] if d["severity"] == "error"]
    note = (f"; it does not compile yet ({len(problems)} error(s), e.g. {problems[0]['message']})" if problems else "")
    print(f"agent {title!r} created for tenant {args.tenant.strip()} from template {template.name}{note}",
          file=sys.stderr)
    return 0

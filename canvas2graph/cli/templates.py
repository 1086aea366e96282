"""`canvas2graph templates list | export TEMPLATE | create TEMPLATE --tenant NAME`: the shipped agent templates."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from canvas2graph.server.backend.templates import Template, find_template, templates
from canvas2graph.types import UsageError


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
    from canvas2graph.compiler.dsl.load import fill_default_llm
    from canvas2graph.server.backend.store import StoreError, open_store
    from canvas2graph.server.backend.versions import record_version

    dsl = fill_default_llm(template.dsl, args.default_llm) if args.default_llm else template.dsl
    title = args.title or template.text("title")
    try:
        async with open_store(args.db) as store:
            if getattr(args, "exist_ok", False):
                same, _ = await store.list_agents(args.tenant.strip(), title=title, page_size=1)
                if same:
                    found = same[0]
                    print(found.id)
                    print(f"agent {title!r} of tenant {args.tenant.strip()} exists already", file=sys.stderr)
                    return 0
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

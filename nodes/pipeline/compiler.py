"""Compiler (rag/flow/compiler, rag/advanced_rag/knowlege_compile): knowledge compiled by templates.

RAGFlow's Compiler names a compilation template group (`compilation_template_group_id`) whose
templates live in RAGFlow's database. Each template's `config` describes what to extract from the
document: a `kind` (`knowledge_graph`, `timeline`, `list`, `set`, `page_index`, ...), a `guideline`
(`target`, `rules_for_entities`, `rules_for_relations`, `rules_for_time`), `global_rules`, and the
`entity` and `relation` item types (or the older `output.entities`/`output.relations` fields). The
Compiler passes the chunks on (normalised and given RAGFlow's ids) and, per template and batch of
chunks, asks the model for entities, then for relations between them; each becomes a structure row in
RAGFlow's doc-store shape (`content_with_weight` the item's JSON, `compile_kwd`, `knowledge_graph_kwd`
entity or relation, `source_chunk_ids`, `from_entity_kwd`/`to_entity_kwd`, its vector), kept in the
`structure` output and stored with the document's chunks.

Here the templates are given rather than read from RAGFlow's database: inline in
`params.compilation_templates`, or for the group ids the DSL names, from the JSON file that
`CANVAS2GRAPH_COMPILER_TEMPLATES` (or `ingest --compiler-templates FILE`) names. Without either the
Compiler is a compile-time `unsupported` error naming the group. What is not run (tree templates'
RAPTOR, synthesis pages, LLM duplicate judging) is listed in docs/compatibility.md.
"""
from __future__ import annotations

import datetime
import json
import os
from copy import deepcopy
from pathlib import Path
from typing import Any

import xxhash
from pydantic import Field, field_validator

from canvas2graph.nodes.llm import LLMParams, chosen_model, complete, parse_json_answer
from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams, text_of_item
from canvas2graph.nodes.pipeline.tokens import count_tokens
from canvas2graph.nodes.registry import register_pipeline
from canvas2graph.types import NodeConfigError

TEMPLATES_ENV = "CANVAS2GRAPH_COMPILER_TEMPLATES"
STRUCT_TYPES = ("list", "set", "hypergraph")
TYPE_ALIASES = {"graph": "hypergraph", "knowledge_graph": "hypergraph"}
# runner.py: a batch fills half the model's context (100k when unknown); knowledge graphs 2k-4k tokens
STRUCTURE_BUDGET = int(100_000 * 0.5)
KNOWLEDGE_GRAPH_BUDGET = min(max(int(100_000 * 0.1), 2048), 4096)
TEXT_CHUNK_TOKENS, CANDIDATE_TOKENS, MIN_COARSE_TOKENS, MIN_SPLIT_CHARS = 1024, 128, 256, 24


class CompilerParams(PipelineParams, LLMParams):
    compilation_template_group_id: str = ""
    compilation_template_group_ids: list[str] | str = Field(default_factory=list)
    # canvas2graph: the templates themselves, as RAGFlow's template records ({"id", "name", "config"})
    compilation_templates: list[dict[str, Any]] = Field(default_factory=list)
    prompts: list[dict[str, Any]] = Field(default_factory=lambda: [{"role": "user", "content": ""}])

    @field_validator("llm_id")
    @classmethod
    def _llm_id(cls, v: str) -> str:
        """Checked once the templates are known (a Compiler without them is diagnosed for that first)."""
        try:
            return chosen_model(v)
        except ValueError:
            return ""

    @field_validator("compilation_templates")
    @classmethod
    def _templates(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, t in enumerate(v):
            if not isinstance(t.get("config"), dict):
                raise ValueError(f"compilation_templates[{i}] has no 'config' object (RAGFlow's template record)")
        return v

    def groups(self) -> list[str]:
        group = self.compilation_template_group_id or self.compilation_template_group_ids
        groups = [group] if isinstance(group, str) else list(group)
        return [g.strip() for g in groups if isinstance(g, str) and g.strip()]


def norm_kind(kind: Any) -> str:
    return kind.strip().lower().replace("-", "_") if isinstance(kind, str) else ""


def load_template_file(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """{group id: [template records]} from a templates file:
    `{"groups": {"<group id>": ["<template id>", ...]}, "templates": {"<template id>": {"name", "config"}}}`
    (`templates` may also be a list of records with an `id`)."""
    where = f"compiler templates file {path}"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{where}: cannot be read ({e.strerror})") from None
    except ValueError as e:
        raise ValueError(f"{where}: not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), dict):
        raise ValueError(f"{where}: needs a 'groups' object mapping each group id to its template ids")
    templates = doc.get("templates") or {}
    if isinstance(templates, list):
        templates = {str(t.get("id")): t for t in templates if isinstance(t, dict) and t.get("id")}
    if not isinstance(templates, dict):
        raise ValueError(f"{where}: 'templates' must map template ids to records with a 'config'")
    out: dict[str, list[dict[str, Any]]] = {}
    for group, ids in doc["groups"].items():
        ids = ids.get("template_ids") if isinstance(ids, dict) else ids
        if not isinstance(ids, list):
            raise ValueError(f"{where}: groups.{group} must be a list of template ids")
        records = []
        for tid in ids:
            record = templates.get(str(tid))
            if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
                raise ValueError(f"{where}: groups.{group} names template {tid!r}, which has no record with a 'config'")
            records.append({**record, "id": str(tid)})
        out[str(group)] = records
    return out


def resolve_templates(params: CompilerParams) -> list[tuple[str, dict[str, Any]]] | None:
    """[(template id, config)] of the active templates (runner.load_active_templates: a kind, not wiki),
    or None when no templates are given for the Compiler."""
    if params.compilation_templates:
        records = [{**t, "id": str(t.get("id") or f"template-{i + 1}")}
                   for i, t in enumerate(params.compilation_templates)]
    else:
        path = os.environ.get(TEMPLATES_ENV)
        if not path:
            return None
        by_group = load_template_file(path)
        missing = [g for g in params.groups() if g not in by_group]
        if missing or not params.groups():
            return None
        records, seen = [], set()
        for g in params.groups():
            for r in by_group[g]:
                if r["id"] not in seen:
                    seen.add(r["id"])
                    records.append(r)
    return [(r["id"], r["config"]) for r in records if norm_kind(r["config"].get("kind")) not in ("", "wiki")]


# --- prompts (structure.py _struct_hypergraph_prompts) ------------------------------------------
def _get(cfg: Any, *keys: str, default: Any = None) -> Any:
    if not isinstance(cfg, dict):
        return default
    for k in keys:
        if k in cfg:
            return cfg[k]
        for ck in cfg:
            if isinstance(ck, str) and ck.lower() == k.lower():
                return cfg[ck]
    return default


def _localize(value: Any, language: str = "en") -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(f"{i + 1}. {item}" for i, item in enumerate(value))
    if isinstance(value, dict):
        v = value.get(language)
        if v is None and language != "en":
            v = value.get("en")
        if isinstance(v, str):
            return v
        if isinstance(v, list):
            return "\n".join(f"{i + 1}. {item}" for i, item in enumerate(v))
    return ""


def infer_type(cfg: dict[str, Any]) -> str:
    explicit = TYPE_ALIASES.get(norm_kind(_get(cfg, "compile_type")), norm_kind(_get(cfg, "compile_type")))
    if explicit in STRUCT_TYPES:
        return explicit
    kind = TYPE_ALIASES.get(norm_kind(_get(cfg, "kind")), norm_kind(_get(cfg, "kind")))
    if kind:
        return kind
    output = _get(cfg, "output", default={}) or {}
    return "hypergraph" if _get(output, "entities") and _get(output, "relations") else "list"


def _render_fields(fields: list, language: str) -> tuple[str, str]:
    lines, skeleton = [], []
    placeholders = {"list": "[<string>, ...]", "int": "<int>", "float": "<float>", "bool": "<true|false>"}
    for f in fields or []:
        name, ftype = f.get("name", ""), f.get("type", "str")
        req = "optional" if f.get("required") is False else "required"
        lines.append(f"- {name} ({ftype}, {req}): {_localize(f.get('description', ''), language)}")
        skeleton.append(f'"{name}": {placeholders.get(ftype, "<string>")}')
    return "\n".join(lines), "{ " + ", ".join(skeleton) + " }"


def _render_type_fields(fields: list, language: str, *, kind: str) -> tuple[str, str]:
    lines, types = [], []
    for f in fields or []:
        typ = f.get("type") if isinstance(f, dict) else None
        typ = typ.strip() if isinstance(typ, str) else ""
        if not typ:
            continue
        types.append(typ)
        lines.append(f"- type: {typ}")
        desc, rule = _localize(f.get("description"), language), _localize(f.get("rule"), language)
        if desc:
            lines.append(f"  description: {desc}")
        if rule:
            lines.append(f"  rule: {rule}")
    if not types:
        types.append("other")
        lines.append("- type: other")
    one_of = '{ "type": "<one of: ' + "|".join(types) + '>", '
    if kind == "relation":
        skeleton = one_of + ('"source": "<known entity name>", "target": "<known entity name>", "description": '
                             '"<evidence or relation description>", "source_chunk_ids": ["<source chunk id>", ...] }')
    else:
        skeleton = one_of + ('"name": "<exact extracted item text>", "description": "<evidence, definition, or detail '
                             'from the source>", "source_chunk_ids": ["<source chunk id>", ...] }')
    return "\n".join(lines), skeleton


def template_prompts(cfg: dict[str, Any], language: str = "en") -> tuple[str, str]:
    """(entity system prompt, relation system prompt with `{known_nodes}`, "" without relations)."""
    autotype = infer_type(cfg)
    guideline = _get(cfg, "guideline", default={}) or {}
    output = _get(cfg, "output", default={}) or {}
    options = _get(cfg, "options", default={}) or {}
    template_shape = bool(_get(cfg, "entity") or _get(cfg, "relation"))
    target = _localize(_get(guideline, "target"), language)
    rules_e = _localize(_get(guideline, "rules_for_entities"), language)
    rules_r = _localize(_get(guideline, "rules_for_relations"), language)
    rules_t = _localize(_get(guideline, "rules_for_time"), language)
    global_rules = _localize(_get(cfg, "global_rules"), language)
    observation = _get(options, "observation_time") or datetime.date.today().isoformat()
    if rules_t and "{observation_time}" in rules_t:
        rules_t = rules_t.replace("{observation_time}", observation)
    ents = (_get(cfg, "entity", default={}) or {}) if template_shape else (_get(output, "entities", default={}) or {})
    rels = (_get(cfg, "relation", default={}) or {}) if template_shape else (_get(output, "relations", default={}) or {})
    ent_desc, rel_desc = _localize(_get(ents, "description"), language), _localize(_get(rels, "description"), language)
    render = (lambda fs, kind: _render_type_fields(fs, language, kind=kind)) if template_shape else \
        (lambda fs, kind: _render_fields(fs, language))
    ent_text, ent_skel = render(_get(ents, "fields", default=[]) or [], "entity")
    rel_text, rel_skel = render(_get(rels, "fields", default=[]) or [], "relation")

    node = _sections(("# Role and Task", target), ("## Global Rules", global_rules),
                     ("## Entity Extraction Rules", rules_e), ("## Entity Description", ent_desc))
    node.append(f"## Entity Fields:\n{ent_text}")
    node.append("## Response Format:\nReply with a single JSON object of the form: "
                f'{{"items": [{ent_skel}, ...]}}.\n'
                f'Auto-type: "{autotype}". ' + ("Items must be unique. " if autotype == "set" else "")
                + "Return JSON only, no commentary.")
    if not rels:
        return "\n\n".join(node), ""
    edge = _sections(("# Role and Task", target), ("## Global Rules", global_rules),
                     ("## Relation Extraction Rules", rules_r), ("## Time Rules", rules_t),
                     ("## Relation Description", rel_desc))
    edge.append(f"## Relation Fields:\n{rel_text}")
    edge.append("## Known Entities:\n{known_nodes}")
    edge.append("## Response Format:\nReply with a single JSON object of the form: "
                f'{{"items": [{rel_skel}, ...]}}.\n'
                "Only create relations between entities listed in 'Known Entities'. Return JSON only, no commentary.")
    return "\n\n".join(node), "\n\n".join(edge)


def _sections(*parts: tuple[str, str | None]) -> list[str]:
    """The prompt's optional sections, "<heading>:\n<text>", each left out when its text is empty."""
    return [f"{heading}:\n{text}" for heading, text in parts if text]


def entity_id_field(cfg: dict[str, Any]) -> str:
    if _get(cfg, "entity"):
        return "name"
    entity_id = _get(_get(cfg, "identifiers", default={}) or {}, "entity_id")
    if isinstance(entity_id, str) and "{" not in entity_id and entity_id.strip():
        return entity_id.strip()
    for f in _get(_get(_get(cfg, "output", default={}) or {}, "entities", default={}) or {}, "fields", default=[]) or []:
        if f.get("required") is not False:
            return f.get("name", "name")
    return "name"


def relation_member_fields(cfg: dict[str, Any]) -> tuple[str | None, str | None]:
    members = _get(_get(cfg, "identifiers", default={}) or {}, "relation_members")
    if isinstance(members, dict) and (members.get("source") or members.get("src") or members.get("target")
                                      or members.get("tgt")):
        return members.get("source") or members.get("src"), members.get("target") or members.get("tgt")
    if _get(cfg, "relation"):
        return "source", "target"
    rels = _get(_get(cfg, "output", default={}) or {}, "relations", default={}) or {}
    names = {f.get("name") for f in _get(rels, "fields", default=[]) or [] if isinstance(f, dict)}
    return ("source", "target") if {"source", "target"} <= names else (None, None)


def _items(res: Any) -> list[dict]:
    if isinstance(res, dict):
        res = res.get("items")
    return [it for it in res if isinstance(it, dict)] if isinstance(res, list) else []


def _union(*lists: Any) -> list[str]:
    out: list[str] = []
    for lst in lists:
        for v in ([lst] if isinstance(lst, str) else lst or []):
            if v and isinstance(v, str) and v not in out:
                out.append(v)
    return out


def payload_description(payload: dict[str, Any]) -> str:
    parts = []
    for v in payload.values():
        for item in (v if isinstance(v, (list, tuple)) else [v]):
            s = "" if item is None else str(item).strip()
            if s:
                parts.append(s)
    return " ".join(parts)


def payload_chunk_ids(payload: dict[str, Any], batch_ids: list[str]) -> list[str]:
    """The model's source_chunk_ids that are in the batch; the whole batch when it named none."""
    raw = payload.get("source_chunk_ids")
    raw = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    picked = _union([str(c).strip() for c in raw if str(c).strip() in batch_ids])
    return picked or list(batch_ids)


# --- upstream chunks (compiler.py _normalize_upstream_chunks, without rechunking) -----------------
def normalize_upstream(upstream: dict[str, Any]) -> list[dict[str, Any]]:
    fmt = upstream.get("output_format")
    if fmt in ("chunks", "json"):
        records = upstream.get("chunks") if fmt == "chunks" else upstream.get("json")
        out = []
        for record in records if isinstance(records, list) else []:
            if isinstance(record, dict):
                chunk = deepcopy(record)
                chunk["text"] = text_of_item(record)
                out.append(chunk)
        return out
    if fmt in ("markdown", "text", "html"):
        text = upstream.get(fmt)
        return [{"text": text}] if isinstance(text, str) and text.strip() else []
    return []


@register_pipeline("Compiler", CompilerParams, outputs=lambda p: {"chunks", "output_format", "structure"})
class Compiler(PipelineNode):
    def prepare(self) -> None:
        p: CompilerParams = self.params
        try:
            templates = resolve_templates(p)
        except ValueError as e:
            raise NodeConfigError("params.compilation_template_group_id", str(e), "invalid-param") from None
        if templates is None:
            groups = p.groups()
            named = (f"template group {', '.join(groups)} (params.compilation_template_group_id)" if groups
                     else "no template group (RAGFlow requires params.compilation_template_group_id)")
            raise NodeConfigError(
                "obj.component_name",
                f"the Compiler (RAGFlow's knowledge compilation from compilation template groups) compiles with "
                f"{named}, whose templates live in RAGFlow's database: give them with params.compilation_templates, "
                f"or name a templates file with {TEMPLATES_ENV} or `ingest --compiler-templates FILE`, or remove it "
                "to ingest with the rest of the pipeline (the chunks it would have compiled are stored as they are)",
                "unsupported")
        self.templates = templates
        if templates and not p.llm_id:
            try:
                chosen_model(p.llm_id)
            except ValueError as e:
                raise NodeConfigError("params.llm_id", str(e)) from None

    def warnings(self) -> list[tuple[str, str, str]]:
        out = []
        for tid, cfg in self.templates:
            if norm_kind(cfg.get("kind")) == "tree":
                out.append(("not-run", f"template {tid} is a tree (RAPTOR) template, which canvas2graph does not run: "
                            "its summaries are not built", "params.compilation_template_group_id"))
            if cfg.get("rechunk"):
                out.append(("not-run", f"template {tid} asks to rechunk, which canvas2graph does not do: the chunks "
                            "are kept as they come", "params.compilation_template_group_id"))
            if (cfg.get("synthesis") or {}).get("enabled"):
                out.append(("not-run", f"template {tid} has synthesis (wiki pages), which canvas2graph does not run",
                            "params.compilation_template_group_id"))
        return out

    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        job.progress(0.01, "Start knowledge compilation.")
        chunks = normalize_upstream(upstream)
        templates = [(tid, cfg) for tid, cfg in self.templates if norm_kind(cfg.get("kind")) != "tree"]
        if not chunks:
            return {"output_format": "chunks", "chunks": [], "structure": []}
        doc_id = str(job.file.get("doc_id") or job.file.get("sha256") or job.file.get("name") or "")
        for idx, ck in enumerate(chunks):
            ck["doc_id"] = doc_id
            ck["id"] = xxhash.xxh64(f"{ck['text']}\x00{ck['doc_id']}\x00{idx}".encode()).hexdigest()
        if not templates:
            job.progress(0, "No active compilation templates resolved from the configured groups.")
            return {"output_format": "chunks", "chunks": chunks, "structure": []}
        job.progress(0.05, f"Start document knowledge compilation ({len(templates)} template(s)) ...")
        rows: list[dict[str, Any]] = []
        for n, (tid, cfg) in enumerate(templates, start=1):
            found = await self._template(tid, cfg, chunks, job, doc_id)
            merged, dropped = merge_exact_named(found)
            rows += merged
            ents = sum(1 for r in merged if r["knowledge_graph_kwd"] == "entity")
            job.progress(0.05 + 0.9 * n / len(templates),
                         f"Document knowledge compilation done ({n}/{len(templates)}): inserted={len(merged)}, "
                         f"updated=0, duplicates_dropped={dropped} ({ents} entities, {len(merged) - ents} relations)")
        await self._embed(rows, job)
        return {"output_format": "chunks", "chunks": chunks, "structure": rows}

    async def _template(self, tid: str, cfg: dict[str, Any], chunks: list[dict], job: Job, doc_id: str) -> list[dict]:
        language = "en"
        node_prompt, edge_prompt = template_prompts(cfg, language)
        autotype, kind = infer_type(cfg), (norm_kind(cfg.get("kind")) or infer_type(cfg))
        budget = KNOWLEDGE_GRAPH_BUDGET if norm_kind(cfg.get("kind")) == "knowledge_graph" else STRUCTURE_BUDGET
        id_field, (src_field, tgt_field) = entity_id_field(cfg), relation_member_fields(cfg)
        name = str(job.file.get("name") or "")
        rows: list[dict] = []
        batches = list(_batches(chunks, budget))
        for b, batch in enumerate(batches, start=1):
            job.progress(0.05, f"  compile batch {b} ({len(batch)} chunks) for template {tid}")
            ids = [c["id"] for c in batch if c["text"].strip()]
            text = "\n\n".join(f"[CHUNK_ID: {c['id']}]\n{c['text']}\n[END_CHUNK]" for c in batch if c["text"].strip())
            user = ("## Source Text:\nEach source chunk is enclosed by [CHUNK_ID: ...] and [END_CHUNK]. For every "
                    "entity and relation, return source_chunk_ids containing only the IDs of chunks that support that "
                    f"item.\n{text}\n\n## Output (JSON only):")
            nodes = _items(await self._ask(node_prompt, user, job))
            edges: list[dict] = []
            if edge_prompt:
                known = _union([str(n.get(id_field)).strip() for n in nodes if n.get(id_field) is not None])
                known_str = "- " + "\n- ".join(known) if known else "(none)"
                edges = _items(await self._ask(edge_prompt.replace("{known_nodes}", known_str), user, job))
            for payload, what in [(p, "entity") for p in nodes] + [(p, "relation") for p in edges]:
                rows.append(structure_row(payload, autotype, doc_id, name, payload_chunk_ids(payload, ids), what,
                                          src_field, tgt_field, tid, kind))
        return rows

    async def _ask(self, system: str, user: str, job: Job) -> Any:
        answer = await complete(self.params.llm_id, self.id, [{"role": "system", "content": system},
                                                              {"role": "user", "content": user}],
                                job.ctx, {"temperature": 0.1})
        return parse_json_answer(answer)

    async def _embed(self, rows: list[dict], job: Job) -> None:
        embedder = job.ctx.services.get("ingest_embedder")
        if not rows or embedder is None:
            return
        vectors = await embedder.embed_documents([payload_description(json.loads(r["content_with_weight"]))
                                                  for r in rows])
        for row, vec in zip(rows, vectors):
            row[f"q_{len(vec)}_vec"] = list(vec)


def _batches(chunks: list[dict], budget: int):
    """runner.py's dynamic buffers: chunks in order, a batch closed when the next would pass the budget."""
    batch, tokens = [], 0
    for ck in chunks:
        n = count_tokens(ck["text"])
        if batch and tokens + n > budget:
            yield batch
            batch, tokens = [], 0
        batch.append(ck)
        tokens += n
        if tokens >= budget:
            yield batch
            batch, tokens = [], 0
    if batch:
        yield batch


def structure_row(payload: dict, compile_kwd: str, doc_id: str, doc_name: str, chunk_ids: list[str], kind: str,
                  src_field: str | None, tgt_field: str | None, template_id: str, template_kind: str) -> dict:
    """structure.py _struct_to_doc_storage_doc (its vector added later, when the dataset has a model)."""
    from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
    content = json.dumps(payload, ensure_ascii=False)
    description = payload_description(payload)
    tokenizer = get_tokenizer()
    ltks = tokenizer.tokenize(description) if description else ""
    row = {"content_with_weight": content, "compile_kwd": compile_kwd, "knowledge_graph_kwd": kind,
           "scope_kwd": "doc", "doc_id": doc_id, "docnm_kwd": doc_name, "source_chunk_ids": list(chunk_ids),
           "content_ltks": ltks, "content_sm_ltks": tokenizer.fine_grained(ltks) if ltks else "",
           "id": xxhash.xxh64(":".join([content, doc_id, template_id]).encode("utf-8", "surrogatepass")).hexdigest()}
    try:
        row["mention_count_int"] = int(payload.get("mention_count") or 1)
    except (TypeError, ValueError):
        row["mention_count_int"] = 1
    name = payload.get("name")
    if name is not None and str(name).strip():
        row["name_kwd"] = str(name).strip().lower()
    row["compilation_template_ids"] = [template_id]
    row["compilation_template_kind_kwd"] = template_kind
    if kind == "relation":
        for field, key in ((src_field, "from_entity_kwd"), (tgt_field, "to_entity_kwd")):
            value = payload.get(field) if field else None
            if value is not None and str(value).strip():
                row[key] = str(value).strip()
    return row


def merge_exact_named(rows: list[dict]) -> tuple[list[dict], int]:
    """structure.py _struct_merge_exact_named_entities: same-name entities of a template become one row
    (the longer description, the union of source chunks); relations and unnamed items are kept."""
    kept: dict[str, dict] = {}
    order: list[str] = []
    others: list[dict] = []
    dropped = 0
    for row in rows:
        key = row.get("name_kwd", "").casefold() if row["knowledge_graph_kwd"] == "entity" else ""
        if not key:
            others.append(row)
            continue
        if key not in kept:
            kept[key] = row
            order.append(key)
            continue
        old = kept[key]
        left, right = json.loads(old["content_with_weight"]), json.loads(row["content_with_weight"])
        merged = dict(left)
        for k, v in right.items():
            if k not in merged or merged[k] in (None, "", []):
                merged[k] = v
        types = {str(left.get("type") or "").strip().casefold(), str(right.get("type") or "").strip().casefold()}
        for preferred in ("title", "fact", "conclusion"):
            if preferred in types:
                merged["type"] = preferred
                break
        merged["description"] = max([left.get("description") or "", right.get("description") or ""],
                                     key=lambda v: len(str(v)))
        merged["source_chunk_ids"] = _union(left.get("source_chunk_ids"), right.get("source_chunk_ids"))
        description = payload_description(merged)
        from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
        tokenizer = get_tokenizer()
        ltks = tokenizer.tokenize(description) if description else ""
        kept[key] = {**old, "content_with_weight": json.dumps(merged, ensure_ascii=False),
                     "source_chunk_ids": _union(old["source_chunk_ids"], row["source_chunk_ids"]),
                     "content_ltks": ltks, "content_sm_ltks": tokenizer.fine_grained(ltks) if ltks else ""}
        dropped += 1
    return [kept[k] for k in order] + others, dropped

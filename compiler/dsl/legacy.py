"""Canvases from RAGFlow v0.19 and before -> today's components.

RAGFlow's v0.20 rewrite of the canvas dropped its first components (Answer, Generate, RewriteQuestion,
KeywordExtract, Relevant, Concentrator, Template, Baidu, Bing, BaiduFanyi, Code) and the engine they
ran on, with no migration: an old agent no longer opens. That engine worked differently, so a rename is
not enough:

- **Answer is where a turn ends.** The flow runs from where the last turn stopped until it reaches an
  Answer, which shows its input and waits for the user; the next message continues after that Answer.
  Today every turn starts at Begin and ends where the flow ends. So an Answer becomes a Message, Begin
  leads to what followed the first Answer, and when several Answers lead to different places, an
  `env.legacy_answer` variable remembers which one spoke last and a Switch after Begin resumes there.
- **A component's input is its upstream's output** (`get_input`), not a reference: whichever upstream
  ran (Switch, Categorize, Relevant and Concentrator pass their own input on), or the user's message
  after an Answer or Begin. A prompt names that input `{input}` and other components `{Generate:X}`.
  Today's components read references, so each input becomes a template of the upstreams' outputs: only
  the branch that ran this turn has a value (RAGFlow resets the others), so their concatenation is it.
- **Iteration split its input by `delimiter`** and collected the body's last output; today it walks a
  list, so a StringTransform split comes before it and a merge after it.

What has no counterpart gets a substitute with a warning (Baidu and Bing search DuckDuckGo, which needs
no key; BaiduFanyi translates with an LLM) or, where nothing fits, an error naming the component.
docs/compatibility.md lists each component's migration.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from canvas2graph.compiler.dsl.diagnostics import Diagnostic

# Old bookkeeping params no component reads any more.
BOOKKEEPING = ("debug_inputs", "inputs", "output", "output_var_name", "query", "parameters")
ROUTERS = frozenset({"Switch", "Categorize", "Relevant"})
RESUME_VARIABLE = "legacy_answer"
# The key of each migrated component's text output, by its new component_name.
TEXT_KEY = {"LLM": "content", "Message": "content", "Retrieval": "formalized_content", "StringTransform": "result",
            "WenCai": "report", "YahooFinance": "report", "Email": "success", "Invoke": "result",
            "CodeExec": "result"}
_OLD_REF = re.compile(r"\{([a-z]+[:@][a-z0-9_-]+)\}", re.IGNORECASE)


def is_legacy(dsl: dict) -> bool:
    """Whether the DSL is an old canvas: its engine required an Answer, and Generate was its model call.
    (Today's editor still offers operators such as RewriteQuestion and Bing that no engine runs; alone
    they get the usual "no engine class" diagnostic.)"""
    comps = dsl.get("components")
    if not isinstance(comps, dict):
        return False
    return any(_name(c) in ("Answer", "Generate") for c in comps.values())


def _name(raw: Any) -> str:
    obj = raw.get("obj") if isinstance(raw, dict) else None
    return obj.get("component_name", "") if isinstance(obj, dict) else ""


@dataclass
class _Old:
    """One component of the old canvas, with its edges read once."""

    id: str
    name: str
    params: dict
    downstream: list[str]
    parent_id: str | None
    upstream: list[str] = field(default_factory=list)


class Migration:
    """One old canvas being rewritten. `run()` returns the new DSL and what the migration has to say."""

    def __init__(self, dsl: dict):
        self.source = dsl
        self.notes: list[Diagnostic] = []
        self.old: dict[str, _Old] = {}
        self.new: dict[str, dict] = {}
        for cid, raw in dsl["components"].items():
            if not isinstance(raw, dict) or not isinstance(raw.get("obj"), dict) or not isinstance(_name(raw), str):
                self.new[cid] = raw         # kept as it is: loading it reports what is wrong
                continue
            params = raw["obj"].get("params")
            down = raw.get("downstream")
            self.old[cid] = _Old(cid, _name(raw), copy.deepcopy(params) if isinstance(params, dict) else {},
                                 [d for d in down if isinstance(d, str)] if isinstance(down, list) else [],
                                 raw.get("parent_id") or None)
            self._check_params(self.old[cid])
        self.variables: dict[str, dict] = {}
        self.redirect: dict[str, dict[str, str]] = {}   # upstream id -> {old target: new target}

    # --- the whole rewrite ------------------------------------------------------------------------
    def run(self) -> dict:
        self._route_targets_as_edges()
        self._splice_concentrators()
        self._link_upstream()
        for cpn in self.old.values():
            self._migrate(cpn)
        self._turns()
        out = {k: copy.deepcopy(v) for k, v in self.source.items() if k not in ("components", "path", "answer")}
        out["components"] = self.new
        out["path"] = []
        if self.variables:
            declared = out.get("variables") if isinstance(out.get("variables"), dict) else {}
            out["variables"] = {**declared, **self.variables}
            out["globals"] = {**(out.get("globals") or {}), **{f"env.{k}": v["value"] for k, v in self.variables.items()}}
        return out

    def warn(self, cid: str, message: str, field: str | None = None) -> None:
        self.notes.append(Diagnostic("legacy-migrated", message, component_id=cid, field=field, severity="warning"))

    def error(self, cid: str, message: str, field: str | None = None) -> None:
        self.notes.append(Diagnostic("legacy-unsupported", message, component_id=cid, field=field))

    def _check_params(self, cpn: _Old) -> None:
        """The old params the migration reads, each of the shape the old engine took; a wrong one is an
        error naming it, and is read as empty so that every wrong field is reported in one pass."""
        for key, value in list(cpn.params.items()):
            shape = PARAM_SHAPES.get(key)
            if shape is None or value is None:
                continue
            kinds, element, what = shape
            ok = isinstance(value, kinds) and not isinstance(value, bool)
            if ok and element is not None:
                values = value.values() if isinstance(value, dict) else value
                ok = all(isinstance(v, element) for v in values)
            if not ok:
                self.error(cpn.id, f"{key} must be {what} in an old canvas, not {type(value).__name__}", f"params.{key}")
                cpn.params[key] = kinds[0]() if isinstance(kinds, tuple) else kinds()
        for cond in cpn.params.get("conditions") or []:
            if not isinstance(cond.get("items", []), list) or not all(isinstance(i, dict) for i in cond.get("items") or []):
                self.error(cpn.id, "a condition's items must be a list of objects", "params.conditions")
                cond["items"] = []

    # --- edges ------------------------------------------------------------------------------------
    def _route_targets_as_edges(self) -> None:
        """The old engine added every Categorize target to its downstream on load; Switch targets too."""
        for cpn in self.old.values():
            for target in self._route_targets(cpn):
                if target not in cpn.downstream:
                    cpn.downstream.append(target)

    def _route_targets(self, cpn: _Old) -> list[str]:
        targets: list[str] = []
        if cpn.name == "Categorize":
            for desc in (cpn.params.get("category_description") or {}).values():
                targets += _ids(desc.get("to")) if isinstance(desc, dict) else []
        elif cpn.name == "Switch":
            for cond in cpn.params.get("conditions") or []:
                targets += _ids(cond.get("to")) if isinstance(cond, dict) else []
            targets += _ids(cpn.params.get("end_cpn_id"))
        elif cpn.name == "Relevant":
            targets += [t for t in (cpn.params.get("yes"), cpn.params.get("no")) if isinstance(t, str) and t]
        return [t for t in targets if t in self.old]

    def _splice_concentrators(self) -> None:
        """A Concentrator only joins edges (its output is empty and readers skip it): wire around it."""
        for cid in [c for c, cpn in self.old.items() if cpn.name == "Concentrator"]:
            after = self.old.pop(cid).downstream
            for cpn in self.old.values():
                if cid in cpn.downstream:
                    at = cpn.downstream.index(cid)
                    cpn.downstream[at:at + 1] = [d for d in after if d not in cpn.downstream]
                _retarget(cpn.params, cid, after)
            self.warn(cid, "Concentrator only joined edges in RAGFlow's old canvas; its edges now join directly")

    def _link_upstream(self) -> None:
        for cpn in self.old.values():
            cpn.downstream = [d for d in dict.fromkeys(cpn.downstream) if d in self.old]
            for d in cpn.downstream:
                self.old[d].upstream.append(cpn.id)

    # --- what a component reads -------------------------------------------------------------------
    def text_ref(self, cid: str) -> str:
        """The reference to a component's text output after migration ("" when it has none)."""
        if "@" in cid:                                  # begin@key: a Begin form field
            return cid
        cpn = self.old.get(cid)
        if cpn is None:
            return ""
        if cpn.name in ("Answer", "Begin"):
            return "sys.query"                          # an Answer's output is the user's last message
        if cpn.name == "IterationItem":
            return f"{cid}@item"
        if cpn.name == "Iteration":
            return f"{cid}__text@result"
        if cpn.name in ROUTERS:                         # a router passes its own input on
            return ""
        return f"{cid}@{TEXT_KEY.get(self.new_name(cpn), 'formalized_content')}"

    def new_name(self, cpn: _Old) -> str:
        return {"Generate": "LLM", "RewriteQuestion": "LLM", "KeywordExtract": "LLM", "BaiduFanyi": "LLM",
                "Answer": "Message", "Template": "StringTransform", "Code": "CodeExec",
                "Baidu": "DuckDuckGo", "Bing": "DuckDuckGo"}.get(cpn.name, cpn.name)

    def input_template(self, cid: str) -> str:
        """RAGFlow's get_input() as a template: the `query` sources, else whichever upstream ran."""
        cpn = self.old[cid]
        sources = [q for q in cpn.params.get("query") or [] if isinstance(q, dict)]
        if sources:
            parts = []
            for q in sources:
                if isinstance(q.get("component_id"), str) and q["component_id"]:
                    ref = self.text_ref(q["component_id"])
                    parts.append("{" + ref + "}" if ref else "")
                elif q.get("value"):
                    parts.append(str(q["value"]))
            return "\n".join(p for p in parts if p)
        refs = list(dict.fromkeys(self._upstream_refs(cid, set())))
        return "".join("{" + r + "}" for r in refs)

    def _upstream_refs(self, cid: str, seen: set[str]) -> list[str]:
        seen.add(cid)
        refs: list[str] = []
        cpn = self.old[cid]
        ups = cpn.upstream
        if not ups and cpn.parent_id in self.old and cpn.name == "IterationItem":
            return []
        for u in ups:
            if u in seen:
                continue
            up = self.old[u]
            if up.name in ROUTERS:
                refs += self._upstream_refs(u, seen)
            elif cpn.name == "Answer" and up.name in ("Begin", "Message"):
                continue        # Begin's prologue and a Message's text are shown by Begin and the Message today
            else:
                refs.append(self.text_ref(u))
        return [r for r in refs if r]

    def prompt_text(self, cid: str, text: str) -> str:
        """An old prompt with `{input}`, `{Component:Id}` and `parameters` keys made into references."""
        cpn = self.old[cid]
        keys = {p["key"]: p["component_id"] for p in cpn.params.get("parameters") or []
                if isinstance(p.get("key"), str) and p["key"] and isinstance(p.get("component_id"), str)}
        used_refs = False

        def component(m: re.Match) -> str:
            nonlocal used_refs
            name = m.group(1)
            if name.lower().startswith("begin@"):
                used_refs = True
                return "{" + name + "}"
            target = next((k for k in self.old if k.lower() == name.lower()), None)
            if target is None:
                return m.group(0)
            used_refs = True
            ref = self.text_ref(target)
            return "{" + ref + "}" if ref else ""

        text = _OLD_REF.sub(component, text)
        for key, source in keys.items():
            ref = self.text_ref(source)
            text = text.replace("{" + key + "}", "{" + ref + "}" if ref else "")
        if "{input}" in text:
            # the old Generate filled {input} only when the prompt named no component itself
            text = text.replace("{input}", "" if used_refs or keys else self.input_template(cid))
        return text

    # --- one component ----------------------------------------------------------------------------
    def _migrate(self, cpn: _Old) -> None:
        handler = getattr(self, f"_m_{cpn.name}", None)
        if handler is not None:
            handler(cpn)
        elif cpn.name in TOOLS:
            self._tool(cpn, cpn.name)
        else:
            self.put(cpn, cpn.name, self._kept_params(cpn))

    def put(self, cpn: _Old, name: str, params: dict, downstream: list[str] | None = None, cid: str | None = None,
            parent_id: str | None = None) -> None:
        entry: dict[str, Any] = {"obj": {"component_name": name, "params": params},
                                 "downstream": list(cpn.downstream if downstream is None else downstream),
                                 "upstream": []}
        parent = parent_id if parent_id is not None else cpn.parent_id
        if parent:
            entry["parent_id"] = parent
        self.new[cid or cpn.id] = entry

    @staticmethod
    def _kept_params(cpn: _Old) -> dict:
        return {k: v for k, v in cpn.params.items() if k not in BOOKKEEPING}

    def _llm(self, cpn: _Old, sys_prompt: str, user: str, window: int | None = None, **extra: Any) -> None:
        keep = ("llm_id", "temperature", "top_p", "presence_penalty", "frequency_penalty", "max_tokens",
                "temperatureEnabled", "topPEnabled", "presencePenaltyEnabled", "frequencyPenaltyEnabled",
                "maxTokensEnabled")
        params = {k: cpn.params[k] for k in keep if k in cpn.params}
        for name, top in (("temperature", 1), ("top_p", 1), ("presence_penalty", 1), ("frequency_penalty", 1)):
            if isinstance(params.get(name), (int, float)) and not 0 <= params[name] <= top:
                params[name] = min(max(params[name], 0), top)
        params.update(sys_prompt=sys_prompt, prompts=[{"role": "user", "content": user}], cite=False, **extra)
        if window is not None:
            params["message_history_window_size"] = window
        self.put(cpn, "LLM", params)

    def _m_Begin(self, cpn: _Old) -> None:
        inputs = {}
        for q in cpn.params.get("query") or []:
            if isinstance(q.get("key"), str) and q["key"]:
                inputs[q["key"]] = {k: v for k, v in q.items() if k != "key"}
        params = {"prologue": cpn.params.get("prologue", ""), "mode": "conversational"}
        if inputs:
            params["inputs"] = inputs
        self.put(cpn, "Begin", params)

    def _m_Answer(self, cpn: _Old) -> None:
        if cpn.upstream and all(self.old[u].name == "Begin" for u in cpn.upstream):
            return          # it only showed Begin's prologue, which Begin shows itself today
        shown = self.input_template(cpn.id)
        if not shown:
            return          # it only showed a Message's text, which the Message shows itself today
        posts = [p for p in cpn.params.get("post_answers") or [] if isinstance(p, str) and p]
        self.put(cpn, "Message", {"content": [shown + p for p in posts] or [shown]}, downstream=[])

    def _m_Generate(self, cpn: _Old) -> None:
        # the old Generate sent the prompt as the system message and the conversation as the messages
        self._llm(cpn, self.prompt_text(cpn.id, str(cpn.params.get("prompt") or "")), "{sys.query}",
                  int(cpn.params.get("message_history_window_size", 12) or 0))
        if cpn.params.get("cite"):
            self.warn(cpn.id, "cite: the old Generate inserted citations from an upstream Retrieval; the migrated "
                      "LLM answers without them (an Agent with a Retrieval tool cites)", "params.cite")

    def _m_RewriteQuestion(self, cpn: _Old) -> None:
        language = str(cpn.params.get("language") or "")
        prompt = ("Rewrite the user's latest message as one complete, standalone question, using the conversation "
                  "for whatever it leaves out (names, dates, what 'it' refers to). Reply with the question only"
                  + (f", in {language}." if language else ", in the language of the user's message."))
        self._llm(cpn, prompt, self.input_template(cpn.id) or "{sys.query}",
                  int(cpn.params.get("message_history_window_size", 6) or 0))

    def _m_KeywordExtract(self, cpn: _Old) -> None:
        top = cpn.params.get("top_n", 1)
        prompt = (f"Read the user's question and list its {top} most important keywords or phrases, separated by "
                  "commas, in the language of the question. Reply with the keywords only.")
        self._llm(cpn, prompt, self.input_template(cpn.id) or "{sys.query}", 0)

    def _m_BaiduFanyi(self, cpn: _Old) -> None:
        target = cpn.params.get("target_lang") or "the user's language"
        self._llm(cpn, f"Translate the text into {target}. Reply with the translation only.",
                  self.input_template(cpn.id) or "{sys.query}", 0, llm_id=cpn.params.get("llm_id", ""))
        self.warn(cpn.id, "BaiduFanyi has no counterpart in RAGFlow 0.20 and later; it translates with an LLM now "
                  "(give llm_id, or --default-llm)")

    def _m_Relevant(self, cpn: _Old) -> None:
        """A relevance grader: an LLM answering yes or no, then a Switch on its answer."""
        prompt = ("You grade whether retrieved documents help answer a question. If they share keywords or meaning "
                  "with it, answer yes; otherwise answer no. Reply with yes or no only.")
        yes, no = cpn.params.get("yes"), cpn.params.get("no")
        grader = _Old(cpn.id, cpn.name, cpn.params, [f"{cpn.id}__route"], cpn.parent_id)
        self._llm(grader, prompt, "Question: {sys.query}\nDocuments:\n" + self.input_template(cpn.id), 0)
        route = {"conditions": [{"logical_operator": "and", "to": [yes] if yes else [],
                                 "items": [{"cpn_id": f"{cpn.id}@content", "operator": "contains", "value": "yes"}]}],
                 "end_cpn_ids": [no] if no else []}
        self.put(cpn, "Switch", route, downstream=[d for d in (yes, no) if d], cid=f"{cpn.id}__route")

    def _m_Categorize(self, cpn: _Old) -> None:
        categories = {}
        for name, desc in (cpn.params.get("category_description") or {}).items():
            desc = dict(desc) if isinstance(desc, dict) else {}
            desc["to"] = _ids(desc.get("to"))
            examples = desc.get("examples")
            if isinstance(examples, str):
                desc["examples"] = [e for e in examples.splitlines() if e.strip()]
            categories[name] = desc
        query = self.input_template(cpn.id)
        ref = query[1:-1] if query.count("{") == 1 and query.startswith("{") and query.endswith("}") else "sys.query"
        params = {k: cpn.params[k] for k in ("llm_id", "temperature", "top_p", "max_tokens") if k in cpn.params}
        params.update(category_description=categories, query=ref,
                      message_history_window_size=int(cpn.params.get("message_history_window_size", 1) or 1))
        self.put(cpn, "Categorize", params)

    def _m_Switch(self, cpn: _Old) -> None:
        conditions = []
        for cond in cpn.params.get("conditions") or []:
            if not isinstance(cond, dict):
                continue
            items = []
            for item in cond.get("items") or []:
                if not isinstance(item.get("cpn_id"), str) or not item["cpn_id"]:
                    continue
                ref = self.text_ref(item["cpn_id"]) or "sys.query"
                items.append({"cpn_id": ref, "operator": item.get("operator", ""), "value": item.get("value", "")})
            conditions.append({"logical_operator": cond.get("logical_operator", "and"), "items": items,
                               "to": _ids(cond.get("to"))})
        ends = [e for e in _ids(cpn.params.get("end_cpn_id")) if e in self.old]
        self.put(cpn, "Switch", {"conditions": conditions, "end_cpn_ids": ends})

    def _m_Message(self, cpn: _Old) -> None:
        self.put(cpn, "Message", {"content": [m for m in cpn.params.get("messages") or [] if isinstance(m, str)]})

    def _m_Template(self, cpn: _Old) -> None:
        # Template printed lists one item a line; StringTransform's merge joins lists with its first delimiter
        script = self.prompt_text(cpn.id, str(cpn.params.get("content") or ""))
        self.put(cpn, "StringTransform", {"method": "merge", "script": script, "delimiters": ["\n"],
                                          "outputs": {"result": {"type": "string", "value": ""}}})

    def _m_Retrieval(self, cpn: _Old) -> None:
        params = self._kept_params(cpn)
        for gone in ("kb_vars", "tavily_api_key", "message_history_window_size"):
            params.pop(gone, None)
        params["query"] = self.input_template(cpn.id) or "{sys.query}"
        self.put(cpn, "Retrieval", params)

    def _m_Code(self, cpn: _Old) -> None:
        arguments = {}
        for arg in cpn.params.get("arguments") or []:
            if isinstance(arg.get("name"), str) and arg["name"]:
                source = arg.get("component_id")
                arguments[arg["name"]] = (self.text_ref(source) if isinstance(source, str) else "") or "sys.query"
        self.put(cpn, "CodeExec", {"lang": cpn.params.get("lang", "python"), "script": cpn.params.get("script", ""),
                                   "arguments": arguments,
                                   "outputs": {"result": {"type": "string", "value": ""}}})

    def _m_Baidu(self, cpn: _Old) -> None:
        self._tool(cpn, "DuckDuckGo", {"top_n": cpn.params.get("top_n", 10)})
        self.warn(cpn.id, f"{cpn.name} search was removed in RAGFlow 0.20; this canvas searches DuckDuckGo "
                  "instead (no API key needed)")

    _m_Bing = _m_Baidu

    def _m_Iteration(self, cpn: _Old) -> None:
        """split (input -> list) -> Iteration over it -> merge (the collected outputs -> one text)."""
        split, text = f"{cpn.id}__split", f"{cpn.id}__text"
        source = self.input_template(cpn.id)
        one_ref = re.fullmatch(r"\{([^{}]+)\}", source)
        if one_ref is None:
            self.error(cpn.id, "an old Iteration splits one upstream's text; this one reads "
                       f"{source or 'nothing'}: connect one component to it", "params.query")
            return
        delimiter = str(cpn.params.get("delimiter") or ",")
        self.put(cpn, "StringTransform", {"method": "split", "split_ref": one_ref.group(1), "delimiters": [delimiter],
                                          "outputs": {"result": {"type": "array<string>", "value": []}}},
                 downstream=[cpn.id], cid=split)
        for up in cpn.upstream:                     # the upstream now leads to the split
            self.redirect.setdefault(up, {})[cpn.id] = split
        ends = [c for c in self.old.values() if c.parent_id == cpn.id and not c.downstream and c.name != "IterationItem"]
        outputs = {}
        if ends:
            end = ends[-1]
            outputs["content"] = {"ref": self.text_ref(end.id), "type": "array<string>"}
        self.put(cpn, "Iteration", {"items_ref": f"{split}@result", "outputs": outputs}, downstream=[text])
        self.put(cpn, "StringTransform", {"method": "merge", "script": "{" + f"{cpn.id}@content" + "}" if ends else "",
                                          "delimiters": ["\n"], "outputs": {"result": {"type": "string", "value": ""}}},
                 cid=text)

    def _m_IterationItem(self, cpn: _Old) -> None:
        self.put(cpn, "IterationItem", {})

    def _tool(self, cpn: _Old, name: str, params: dict | None = None) -> None:
        params = self._kept_params(cpn) if params is None else params
        params.pop("message_history_window_size", None)
        params["query"] = self.input_template(cpn.id) or "{sys.query}"
        self.put(cpn, name, params)

    # --- turns ------------------------------------------------------------------------------------
    def _turns(self) -> None:
        """Begin leads where the first Answer led; several Answers resume through env.legacy_answer."""
        for up, moves in self.redirect.items():
            if up in self.old and up in self.new:
                self.new[up]["downstream"] = [moves.get(d, d) for d in self.new[up]["downstream"]]
        answers = [c for c in self.old.values() if c.name == "Answer"]
        begin = next((c for c in self.old.values() if c.name == "Begin"), None)
        if begin is None:
            self.error("begin", "the canvas has no Begin component")
            return
        if not answers:
            self.error(begin.id, "an old canvas needs an Answer where each turn ends; this one has none")
        first = [a for a in answers if a.id in begin.downstream]
        start = [d for d in begin.downstream if self.old[d].name != "Answer"] + [d for a in first for d in a.downstream]
        resumes = {a.id: a.downstream for a in answers if a.downstream}
        distinct = {tuple(v) for v in resumes.values()}
        if len(distinct) <= 1:
            self.new[begin.id]["downstream"] = list(dict.fromkeys(start or [d for v in distinct for d in v]))
            for a in answers:
                if a.id not in self.new:
                    self._lead_to(a.id, [])
            return
        self.variables[RESUME_VARIABLE] = {"name": RESUME_VARIABLE, "type": "string", "value": "",
                                           "description": "the old canvas's Answer that spoke last"}
        route = f"{begin.id}__resume"
        conditions = [{"logical_operator": "and", "to": list(down),
                       "items": [{"cpn_id": f"env.{RESUME_VARIABLE}", "operator": "=", "value": aid}]}
                      for aid, down in resumes.items()]
        self.new[route] = {"obj": {"component_name": "Switch",
                                   "params": {"conditions": conditions, "end_cpn_ids": list(dict.fromkeys(start))}},
                           "downstream": list(dict.fromkeys(start + [d for v in resumes.values() for d in v])),
                           "upstream": []}
        self.new[begin.id]["downstream"] = [route]
        for aid in resumes:
            mark = f"{aid}__mark"
            if aid in self.new:
                self.new[aid]["downstream"] = [mark]
            else:           # an Answer that shows nothing today: what led to it marks the resume point
                self._lead_to(aid, [mark])
            self.new[mark] = {"obj": {"component_name": "VariableAssigner", "params": {"variables": [
                {"variable": f"env.{RESUME_VARIABLE}", "operator": "set", "parameter": aid}]}},
                "downstream": [], "upstream": []}

    def _lead_to(self, gone: str, instead: list[str]) -> None:
        """Edges into a component that was left out lead to `instead`."""
        for entry in self.new.values():
            if isinstance(entry, dict) and isinstance(entry.get("downstream"), list) and gone in entry["downstream"]:
                at = entry["downstream"].index(gone)
                entry["downstream"][at:at + 1] = [d for d in instead if d not in entry["downstream"]]


# What the migration reads of the old params: (types, element type, in words).
PARAM_SHAPES: dict[str, tuple] = {
    "query": ((list,), dict, "a list of sources ({component_id} or {value})"),
    "parameters": ((list,), dict, "a list of {key, component_id}"),
    "arguments": ((list,), dict, "a list of {name, component_id}"),
    "conditions": ((list,), dict, "a list of conditions"),
    "category_description": ((dict,), dict, "an object of categories"),
    "messages": ((list,), str, "a list of texts"),
    "post_answers": ((list,), str, "a list of texts"),
    "end_cpn_id": ((str, list), None, "a component id"),
    **{k: ((str,), None, "text") for k in ("prompt", "content", "delimiter", "language", "lang", "script",
                                            "target_lang", "prologue", "yes", "no")},
    **{k: ((int, float), None, "a number") for k in ("top_n", "message_history_window_size")},
}


def _ids(value: Any) -> list[str]:
    """A route target as a list of ids (old canvases give one id, spliced ones a list)."""
    if isinstance(value, str):
        return [value] if value else []
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def _retarget(params: dict, old: str, new: list[str]) -> None:
    """A route (Categorize's `to`, a Switch condition's `to` or end) that named `old` now names `new`."""
    def moved(to: Any) -> Any:
        if to == old:
            return list(new)
        if isinstance(to, list) and old in to:
            return [t for t in to if t != old] + [n for n in new if n not in to]
        return to
    for desc in (params.get("category_description") or {}).values():
        if isinstance(desc, dict) and "to" in desc:
            desc["to"] = moved(desc["to"])
    for cond in params.get("conditions") or []:
        if isinstance(cond, dict) and "to" in cond:
            cond["to"] = moved(cond["to"])
    if params.get("end_cpn_id") == old:
        params["end_cpn_id"] = list(new)


TOOLS = frozenset({"DuckDuckGo", "Wikipedia", "PubMed", "ArXiv", "Google", "GoogleScholar", "GitHub", "QWeather",
                   "Jin10", "TuShare", "AkShare", "YahooFinance", "DeepL", "Crawler", "Email", "ExeSQL", "Invoke",
                   "WenCai"})


def migrate_legacy(dsl: dict) -> tuple[dict, list[Diagnostic]]:
    """An old canvas rewritten into today's components, and the migration's warnings and errors."""
    migration = Migration(dsl)
    return migration.run(), migration.notes

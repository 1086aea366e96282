"""Hypothesis strategies for valid agent DSLs, with the turns to run them: the differential tester's input.

Unlike `tests/fuzz` (hostile documents, for robustness), every DSL drawn here compiles in both engines and
means something: a chain of steps from Begin, each step one of

- a data component (StringTransform, ListOperations, DataOperations, VariableAggregator) or an LLM,
  reading earlier outputs through `{cpn@key}` and `sys.*` references;
- a web tool as a canvas node (TavilySearch, DuckDuckGo), its results scripted by component id;
- an Agent with one or two tools (Wikipedia, Google) that it calls over up to two rounds, one or two calls
  a round, its tools' results scripted by class name;
- a fan-out into two or three parallel components, joined again (a diamond) or left as branches;
- a Switch or a Categorize routing to two or three branches, a branch sometimes to two components at once;
- an Iteration over a split list, its body one or two components (an LLM, a StringTransform, a tool, an
  Agent, or a nested Iteration or Loop: two levels of containers at most), collecting an output;
- a Loop with a counter variable, a VariableAssigner and an optional ExitLoop behind a Switch, its body
  possibly holding an LLM or a nested container;
- a UserFillUp that pauses the turn, sometimes at the end of a branch beside another that ends (a sink):
  the case then has a second turn answering it;
- Messages, streamed (naming an LLM's content) or not;

with exception handling (`exception_method` comment or goto) on the LLMs and the data components, and
scripted model replies, some of them errors. References only name components that dominate the reader
(run on every path to it), so a difference is never just "this value was never produced".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

LLM_ID = "gpt-4o@OpenAI"
WORDS = ["alpha", "beta", "gamma", "delta", "red", "blue", "one", "two", "3", "4.5"]
MAX_CALLS = 12            # scripted replies per model component (auto_reply answers beyond them)
# tools as canvas nodes, their results scripted by component id; tools of Agents, scripted by class name. The
# two sets do not meet: RAGFlow's oracle looks a result up by class name first, canvas2graph by id first
NODE_TOOLS = {"TavilySearch": {"api_key": "tvly-test", "max_results": 3}, "DuckDuckGo": {"top_n": 3, "channel": "text"}}
AGENT_TOOLS = {"Wikipedia": ("wikipedia_search", {"top_n": 3, "language": "en"}),
               "Google": ("google_search", {"api_key": "serp-test", "country": "us", "language": "en"})}
TOOL_TEXTS = ["Found: RAGFlow is a RAG engine.", "Found: LangGraph runs graphs.", "No results."]


@dataclass
class Case:
    """A DSL and the turns that run it (`query`, `inputs`, `script`), as the parity cases hold them."""
    dsl: dict
    turns: list[dict]

    def to_json(self) -> dict:
        return {"dsl": self.dsl, "turns": self.turns}


@dataclass
class _Builder:
    """The canvas being drawn: components in topological order, who dominates whom, what each outputs."""
    draw: Any
    comps: dict[str, dict] = field(default_factory=dict)
    dom: dict[str, set] = field(default_factory=dict)          # component -> the components on every path to it
    outputs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)   # id -> [(key, kind: text|list|obj)]
    counts: dict[str, int] = field(default_factory=dict)
    by_component: dict[str, list] = field(default_factory=dict)
    tool_results: dict[str, list] = field(default_factory=dict)
    fillup: str | None = None
    fillup_fields: list[str] = field(default_factory=list)
    lists: bool = False

    # --- structure -----------------------------------------------------------------------------------
    def new_id(self, name: str) -> str:
        self.counts[name] = self.counts.get(name, 0) + 1
        return f"{name}:{chr(64 + self.counts[name])}{self.counts[name]}"

    def add(self, cid: str, name: str, params: dict, preds: list[str], parent: str | None = None,
            wire: bool = True) -> str:
        entry: dict[str, Any] = {"obj": {"component_name": name, "params": params}, "downstream": [], "upstream": list(preds)}
        if parent:
            entry["parent_id"] = parent
        self.comps[cid] = entry
        if wire:
            for p in preds:
                self.comps[p]["downstream"].append(cid)
        common = set.intersection(*(self.dom[p] for p in preds)) if preds else set()
        self.dom[cid] = common | {cid}
        return cid

    def refs(self, reader_preds: list[str], kind: str = "text") -> list[str]:
        """References a component after `reader_preds` can read: sys.* and the outputs of its dominators."""
        seen = set.intersection(*(self.dom[p] for p in reader_preds)) if reader_preds else set()
        found = ["sys.query"] if kind == "text" else []
        if kind == "text":
            found.append("sys.conversation_turns")
        for cid in sorted(seen):
            for key, k in self.outputs.get(cid, []):
                if k == kind or (kind == "text" and k != "obj"):
                    found.append(f"{cid}@{key}")
        return found

    def text(self, preds: list[str], refs: int | None = None) -> str:
        """A template: words and references, sometimes none, sometimes the same reference twice."""
        choices = self.refs(preds)
        n = self.draw(st.integers(0, 3)) if refs is None else refs
        parts = [self.draw(st.sampled_from(WORDS))]
        for _ in range(n):
            parts.append("{" + self.draw(st.sampled_from(choices)) + "}")
            parts.append(self.draw(st.sampled_from(WORDS + [":", "-", "\\n"])).replace("\\n", "\n"))
        return " ".join(parts)

    # --- components -----------------------------------------------------------------------------------
    def exception(self, params: dict, cid: str, later: list[str]) -> dict:
        how = self.draw(st.sampled_from(["", "", "comment", "goto"] if later else ["", "", "comment"]))
        if how == "comment":
            default = self.draw(st.sampled_from(["(default)", "fallback text"]))
            params.update(exception_method="comment", exception_default_value=default)
        elif how == "goto":
            params.update(exception_method="goto", exception_goto=[self.draw(st.sampled_from(later))])
        return params

    def llm(self, preds: list[str], parent: str | None = None, calls: int = 1) -> str:
        cid = self.new_id("LLM")
        params = {"llm_id": LLM_ID, "sys_prompt": "You are terse.", "temperature": 0.1, "cite": False,
                  "prompts": [{"role": "user", "content": self.text(preds, self.draw(st.integers(1, 2)))}]}
        if self.draw(st.integers(0, 4)) == 0:
            params = self.exception(params, cid, [])
        replies = []
        for i in range(min(calls, MAX_CALLS)):
            if self.draw(st.integers(0, 7)) == 0:
                replies.append({"error": "scripted failure"})
            else:
                replies.append(self.draw(st.sampled_from(["Fine.", "A short answer.", "Two words", "x, y, z", "42"])))
        self.by_component[cid] = replies
        self.add(cid, "LLM", params, preds, parent)
        self.outputs[cid] = [("content", "text")]
        return cid

    def tool_node(self, preds: list[str], parent: str | None = None, calls: int = 1) -> str:
        """A web tool as a canvas node, its executions scripted (by component id): its text alone, or its
        text with the `json` results."""
        name = self.draw(st.sampled_from(sorted(NODE_TOOLS)))
        cid = self.new_id(name)
        results = []
        # one more than it runs: a tool with several upstream components runs again in RAGFlow (no join
        # barrier, a documented difference), which should not make it go to the network
        for _ in range(min(calls, MAX_CALLS) + 1):
            text = self.draw(st.sampled_from(TOOL_TEXTS))
            # a text alone sets `formalized_content` only; in a container's body RAGFlow keeps the `json` of
            # an earlier pass then, which no real search leaves unset: bodies script both
            if parent is None and self.draw(st.booleans()):
                results.append(text)
            else:
                results.append({"outputs": {"formalized_content": text, "json": [{"url": "https://example.com/1",
                                                                                  "content": text}]}, "return": text})
        self.tool_results[cid] = results
        self.add(cid, name, dict(NODE_TOOLS[name]), preds, parent)
        self.outputs[cid] = [("formalized_content", "text"), ("json", "obj")]
        return cid

    def agent(self, preds: list[str], parent: str | None = None, calls: int = 1) -> str:
        """An Agent with one or two tools: each run calls them over 0-2 rounds (one or two calls a round),
        then answers; some runs fail. Tool results are the same text for every call, so that the order in
        which parallel calls take them does not matter."""
        cid = self.new_id("Agent")
        names = self.draw(st.lists(st.sampled_from(sorted(AGENT_TOOLS)), min_size=1, max_size=2, unique=True))
        tools = [{"component_name": n, "name": n, "params": dict(AGENT_TOOLS[n][1])} for n in names]
        functions = [f"{AGENT_TOOLS[n][0]}_{i}" for i, n in enumerate(names)]
        params = {"llm_id": LLM_ID, "sys_prompt": "Use your tools, then answer.", "temperature": 0.1, "cite": False,
                  "max_rounds": 3, "prompts": [{"role": "user", "content": self.text(preds, 1)}], "tools": tools}
        if self.draw(st.integers(0, 4)) == 0:
            params = self.exception(params, cid, [])
        replies = []
        for _ in range(min(calls, MAX_CALLS)):
            for _round in range(self.draw(st.integers(0, 2))):
                picked = self.draw(st.lists(st.sampled_from(functions), min_size=1, max_size=2))
                replies.append({"tool_calls": [{"name": f, "arguments": {"query": self.draw(st.sampled_from(WORDS))}}
                                               for f in picked]})
                for f in picked:
                    name = names[functions.index(f)]
                    self.tool_results.setdefault(name, []).append(f"{name}: {TOOL_TEXTS[0]}")
            if self.draw(st.integers(0, 7)) == 0:
                replies.append({"error": "scripted failure"})
            else:
                replies.append(self.draw(st.sampled_from(["Fine.", "The tools say so.", "x, y, z", "42"])))
        self.by_component[cid] = replies
        self.add(cid, "Agent", params, preds, parent)
        self.outputs[cid] = [("content", "text")]
        return cid

    def message(self, preds: list[str], parent: str | None = None) -> str:
        cid = self.new_id("Message")
        self.add(cid, "Message", {"content": [self.text(preds)]}, preds, parent)
        return cid

    def string_transform(self, preds: list[str], parent: str | None = None) -> str:
        cid = self.new_id("StringTransform")
        if self.draw(st.booleans()):
            ref = self.draw(st.sampled_from(self.refs(preds)))
            params = {"method": "split", "split_ref": ref, "delimiters": self.draw(st.sampled_from([[","], [" "], [",", " "]])),
                      "outputs": {"result": {"type": "Array<string>", "value": []}}}
            kind = "list"
        else:
            params = {"method": "merge", "script": self.text(preds), "delimiters": [self.draw(st.sampled_from([",", " + "]))],
                      "outputs": {"result": {"type": "string", "value": ""}}}
            kind = "text"
        if self.draw(st.integers(0, 5)) == 0:
            params = self.exception(params, cid, [])
        self.add(cid, "StringTransform", params, preds, parent)
        self.outputs[cid] = [("result", kind)]
        return cid

    def list_operations(self, preds: list[str]) -> str:
        cid = self.new_id("ListOperations")
        lists = self.refs(preds, "list")
        use_list = lists and self.draw(st.integers(0, 4))
        query = self.draw(st.sampled_from(lists)) if use_list else self.draw(st.sampled_from(self.refs(preds)))
        params = {"query": query, "operations": self.draw(st.sampled_from(["nth", "head", "tail", "sort", "drop_duplicates"])),
                  "n": self.draw(st.integers(-2, 3)), "sort_method": self.draw(st.sampled_from(["asc", "desc"])),
                  "outputs": {"result": {"type": "Array<?>"}, "first": {"type": "?"}, "last": {"type": "?"}}}
        if self.draw(st.integers(0, 3)) == 0:
            params = self.exception(params, cid, [])
        self.add(cid, "ListOperations", params, preds)
        self.outputs[cid] = [("result", "list"), ("first", "text"), ("last", "text")]
        return cid

    def data_operations(self, preds: list[str]) -> str:
        cid = self.new_id("DataOperations")
        query = [self.draw(st.sampled_from(self.refs(preds, "list") + self.refs(preds, "obj") + ["sys.query"]))]
        operation = self.draw(st.sampled_from(["literal_eval", "select_keys", "combine", "remove_keys"]))
        params = {"query": query, "operations": operation,
                  "select_keys": ["a"], "remove_keys": ["b"], "outputs": {"result": {"type": "Array<Object>", "value": []}}}
        self.add(cid, "DataOperations", params, preds)
        self.outputs[cid] = [("result", "obj")]
        return cid

    def aggregator(self, preds: list[str]) -> str:
        cid = self.new_id("VariableAggregator")
        choices = [r for r in self.refs(preds) if "@" in r]
        picked = self.draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3)) if choices else []
        variables = [{"value": r} for r in picked] + [{"value": "sys.query"}]
        params = {"groups": [{"group_name": "picked", "type": "string", "variables": variables}],
                  "outputs": {"picked": {"type": "string"}}}
        self.add(cid, "VariableAggregator", params, preds)
        self.outputs[cid] = [("picked", "text")]
        return cid


def _step(b: _Builder, tails: list[str], budget: list[int]) -> list[str]:
    """One step after `tails` (all of them lead to it); returns the new tails."""
    kind = b.draw(st.sampled_from(["data", "data", "llm", "llm", "message", "fanout", "switch", "categorize",
                                   "iteration", "loop", "fillup", "tool", "agent"]))
    budget[0] -= 1
    if kind == "data":
        make = b.draw(st.sampled_from([b.string_transform, b.list_operations, b.data_operations, b.aggregator]))
        return [make(tails)]
    if kind == "llm":
        return [b.llm(tails)]
    if kind == "tool":
        return [b.tool_node(tails)]
    if kind == "agent":
        return [b.agent(tails)]
    if kind == "message":
        return [b.message(tails)]
    if kind == "fanout":
        width = b.draw(st.integers(2, 3))
        branches = [b.draw(st.sampled_from([b.llm, b.message, b.string_transform, b.tool_node, b.agent]))(tails)
                    for _ in range(width)]
        budget[0] -= width - 1
        return branches if b.draw(st.booleans()) else [b.message(branches)]
    if kind in ("switch", "categorize"):
        return _router(b, tails, kind, budget)
    if kind == "iteration":
        return [_iteration(b, tails, budget)]
    if kind == "loop":
        return [_loop(b, tails, budget)]
    if b.fillup is None and b.draw(st.booleans()):
        # a branch that ends (a sink Message) beside a chain that pauses: the turn pauses, it does not finish
        b.message(tails)
        chain = b.draw(st.sampled_from([b.llm, b.string_transform, b.message]))(tails)
        return [_fillup(b, [chain])]
    if b.fillup is None:
        return [_fillup(b, tails)]
    return [b.message(tails)]


def _router(b: _Builder, tails: list[str], kind: str, budget: list[int]) -> list[str]:
    """A Switch or Categorize with 2-3 branches; each branch is a component (a Message, an LLM or data)."""
    cid = b.new_id("Switch" if kind == "switch" else "Categorize")
    if kind == "switch":
        params: dict = {"conditions": [], "end_cpn_ids": []}
    else:
        params = {"llm_id": LLM_ID, "query": "sys.query", "message_history_window_size": 1, "category_description": {}}
    b.add(cid, "Switch" if kind == "switch" else "Categorize", params, tails)
    names = ["billing", "weather", "other"][:b.draw(st.integers(2, 3))]
    branches = []
    for i, name in enumerate(names):
        target = b.draw(st.sampled_from([b.message, b.llm, b.string_transform, b.agent]))([cid])
        targets = [target]
        if b.draw(st.integers(0, 3)) == 0:        # a branch to two components: one batch, maybe a stream beside
            targets.append(b.draw(st.sampled_from([b.aggregator, b.string_transform, b.message]))([cid]))
        branches.extend(targets)
        for t in targets:
            b.comps[cid]["downstream"].remove(t)          # routers name their targets in params
        if kind == "categorize":
            params["category_description"][name] = {"description": f"About {name}.", "to": targets}
        elif i == len(names) - 1:
            params["end_cpn_ids"] = targets
        else:
            ref = b.draw(st.sampled_from(b.refs(tails)))
            op = b.draw(st.sampled_from(["contains", "=", "≠", "start with", "empty", "not empty", "≥", "<"]))
            params["conditions"].append({"logical_operator": b.draw(st.sampled_from(["and", "or"])), "to": targets,
                                         "items": [{"cpn_id": ref, "operator": op,
                                                    "value": b.draw(st.sampled_from(WORDS + ["", "2"]))}]})
    if kind == "categorize":
        b.by_component[cid] = [b.draw(st.sampled_from(names + ["none of them"]))]
        b.outputs[cid] = [("category_name", "text")]
    budget[0] -= len(names)
    if b.draw(st.booleans()):
        return branches
    return [b.message(branches)]


def _split_source(b: _Builder, tails: list[str], parent: str | None = None) -> tuple[str, str]:
    """A list to iterate: an earlier list output, or a new split of the query."""
    lists = b.refs(tails, "list")
    if lists and b.draw(st.booleans()):
        return b.draw(st.sampled_from(lists)), tails[0]
    cid = b.new_id("StringTransform")
    b.add(cid, "StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","],
                                   "outputs": {"result": {"type": "Array<string>", "value": []}}}, tails, parent)
    b.outputs[cid] = [("result", "list")]
    b.lists = True
    return f"{cid}@result", cid


PASSES = 4          # at most this many passes of a container body (3 items or 3 loop rounds, plus one)


def _body_step(b: _Builder, prev: str, parent: str, budget: list[int], depth: int, calls: int) -> str:
    """One component of a container's body after `prev`: an LLM, a StringTransform, a tool, an Agent, or
    (two levels at most) a container of its own: an Iteration or a Loop inside an Iteration or a Loop."""
    kinds = ["llm", "llm", "st", "st", "tool", "agent"] + (["iteration", "loop"] if depth < 2 else [])
    kind = b.draw(st.sampled_from(kinds))
    budget[0] -= 1
    if kind == "llm":
        return b.llm([prev], parent=parent, calls=calls)
    if kind == "st":
        return b.string_transform([prev], parent=parent)
    if kind == "tool":
        return b.tool_node([prev], parent=parent, calls=calls)
    if kind == "agent":
        return b.agent([prev], parent=parent, calls=calls)
    if kind == "iteration":
        return _iteration(b, [prev], budget, parent=parent, depth=depth + 1, calls=calls * PASSES)
    return _loop(b, [prev], budget, parent=parent, depth=depth + 1, calls=calls * PASSES)


def _iteration(b: _Builder, tails: list[str], budget: list[int], parent: str | None = None, depth: int = 1,
               calls: int = PASSES) -> str:
    items_ref, before = _split_source(b, tails, parent)
    preds = [before] if before in b.comps and before not in tails else tails
    it = b.new_id("Iteration")
    b.add(it, "Iteration", {"items_ref": items_ref, "outputs": {}}, preds, parent)
    start = b.new_id("IterationItem")
    b.add(start, "IterationItem", {}, [], parent=it, wire=False)
    b.dom[start] = b.dom[it] | {start}
    b.outputs[start] = [("item", "text"), ("index", "text")]
    length = b.draw(st.integers(1, 2))
    prev = start
    for _ in range(length):
        prev = _body_step(b, prev, it, budget, depth, calls)
    key, _kind = b.outputs[prev][0] if b.outputs.get(prev) else b.outputs[start][0]
    ref = f"{prev}@{key}" if b.outputs.get(prev) else f"{start}@item"
    b.comps[it]["obj"]["params"]["outputs"] = {"collected": {"type": "Array<string>", "ref": ref}}
    b.outputs[it] = [("collected", "list")]
    return it              # the body is not visible after it: later components are dominated by `it` only


def _loop(b: _Builder, tails: list[str], budget: list[int], parent: str | None = None, depth: int = 1,
          calls: int = 1) -> str:
    lp = b.new_id("Loop")
    rounds = b.draw(st.integers(1, 3))
    b.add(lp, "Loop", {"loop_variables": [{"variable": "count", "input_mode": "constant", "value": 0, "type": "number"},
                                          {"variable": "text", "input_mode": "variable", "value": "sys.query", "type": "string"}],
                       "loop_termination_condition": [{"variable": f"{lp}@count", "operator": "≥", "value": rounds,
                                                       "input_mode": "constant"}],
                       "logical_operator": "and", "maximum_loop_count": 5}, tails, parent)
    b.outputs[lp] = [("count", "text"), ("text", "text")]
    start = b.new_id("LoopItem")
    b.add(start, "LoopItem", {}, [], parent=lp, wire=False)
    b.dom[start] = b.dom[lp] | {start}
    prev = start
    if b.draw(st.booleans()):
        prev = b.llm([prev], parent=lp, calls=calls * (rounds + 1))
    elif depth < 2 and b.draw(st.integers(0, 2)) == 0:       # a container inside the Loop's body
        prev = _body_step(b, prev, lp, budget, depth, calls * (rounds + 1))
    assign = b.new_id("VariableAssigner")
    items = [{"variable": f"{lp}@count", "operator": "+=", "parameter": 1}]
    text_outputs = [k for k, kind in b.outputs.get(prev, []) if kind == "text"] if prev != start else []
    if text_outputs and b.draw(st.booleans()):
        items.append({"variable": f"{lp}@text", "operator": "overwrite", "parameter": f"{prev}@{text_outputs[0]}"})
    b.add(assign, "VariableAssigner", {"variables": items}, [prev], parent=lp)
    if b.draw(st.integers(0, 2)) == 0:                     # leave early through a Switch and an ExitLoop
        sw, ex, go_on = b.new_id("Switch"), b.new_id("ExitLoop"), b.new_id("StringTransform")
        # RAGFlow refuses a Switch without an ELSE destination: the pass goes on through a merge
        b.add(sw, "Switch", {"conditions": [{"logical_operator": "and", "to": [ex], "items": [
            {"cpn_id": f"{lp}@count", "operator": "≥", "value": b.draw(st.integers(1, 2))}]}], "end_cpn_ids": [go_on]},
            [assign], parent=lp)
        b.add(ex, "ExitLoop", {}, [sw], parent=lp, wire=False)
        b.add(go_on, "StringTransform", {"method": "merge", "script": "{sys.query}", "delimiters": [","]}, [sw],
              parent=lp, wire=False)
        budget[0] -= 3
    budget[0] -= 2
    return lp


def _fillup(b: _Builder, tails: list[str]) -> str:
    cid = b.new_id("UserFillUp")
    fields = b.draw(st.sampled_from([["feedback"], ["feedback", "count"]]))
    inputs = {f: {"type": "line" if f == "feedback" else "number", "name": f.title(), "optional": False} for f in fields}
    b.add(cid, "UserFillUp", {"enable_tips": True, "tips": b.text(tails, 1), "inputs": inputs}, tails)
    b.outputs[cid] = [(f, "text") for f in fields]
    b.fillup, b.fillup_fields = cid, fields
    return cid


@st.composite
def cases(draw, max_steps: int = 8) -> Case:
    """A valid DSL of 3 to ~15 components and its turns: one, a second that answers a form, follow-ups (up to
    three turns in all; a follow-up does not send Begin's form again)."""
    b = _Builder(draw)
    begin_inputs = {}
    if draw(st.integers(0, 3)) == 0:
        begin_inputs = {"topic": {"type": "line", "name": "Topic", "optional": False}}
        if draw(st.booleans()):          # a second field: a follow-up turn leaves both None (RAGFlow's reset)
            begin_inputs["level"] = {"type": "line", "name": "Level", "optional": draw(st.booleans())}
    begin = {"mode": "conversational", "prologue": "Hi!", **({"inputs": begin_inputs} if begin_inputs else {})}
    b.add("begin", "Begin", begin, [])
    b.outputs["begin"] = [(k, "text") for k in begin_inputs]
    tails, budget = ["begin"], [draw(st.integers(2, max_steps))]
    while budget[0] > 0:
        tails = _step(b, tails, budget)
    if draw(st.booleans()):
        b.message(tails)
    for entry in b.comps.values():
        entry.pop("upstream", None)
    query = draw(st.sampled_from(["apple, banana, cherry", "why was I charged twice", "one two", "3,1,2", "[1, 2]"]))
    script = {"by_component": b.by_component, "auto_reply": "Reply from {component}."}
    later = {"auto_reply": "Reply from {component}."}
    if b.tool_results:          # every turn scripts its tools: an unscripted web tool would go to the network
        script["tool_results"] = b.tool_results
        later["tool_results"] = b.tool_results
    first: dict[str, Any] = {"query": query, "script": script}
    if begin_inputs:
        first["inputs"] = {k: {"type": "line", "value": draw(st.sampled_from(WORDS))} for k in begin_inputs
                           if not begin_inputs[k]["optional"] or draw(st.booleans())}
    turns = [first]
    if b.fillup:
        answers = {f: {"type": "line", "value": "make it short"} if f == "feedback" else {"type": "number", "value": 2}
                   for f in b.fillup_fields}
        turns.append({"query": "", "inputs": answers, "script": later})
    follow_ups = draw(st.sampled_from([0, 0, 0, 1, 1, 2]))
    for query in ["and again", "one more, please"][:max(0, min(follow_ups, 3 - len(turns)))]:
        turns.append({"query": query, "script": later})
    return Case({"components": b.comps, "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0,
                                                     "sys.files": []}}, turns)

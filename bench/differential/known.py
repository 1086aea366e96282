"""Differences the tester meets that docs/compatibility.md lists as deliberate, and how to recognise them.

Each `Known` names the row of docs/compatibility.md that states the difference (a phrase of it, which
`tests/bench/test_differential.py` finds in the document, so a row cannot go while the tester still
relies on it) and a test on the difference, the case and RAGFlow's events. The report counts these
apart: only a difference no row explains is a defect to fix or a row to write.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from bench.differential.engines import checker
from bench.differential.generate import Case
from bench.differential.shrink import Difference

ID = re.compile(r"\b[A-Z][A-Za-z]+:[A-Za-z0-9_]+")


def _upstreams(dsl: dict) -> dict[str, int]:
    """How many components lead to each one (downstream lists and routing targets)."""
    count: dict[str, int] = {}
    for entry in dsl["components"].values():
        for t in _targets(entry):
            count[t] = count.get(t, 0) + 1
    return count


def _kinds(dsl: dict) -> set[str]:
    return {e["obj"]["component_name"] for e in dsl["components"].values()}


def _ending(events: list[dict]) -> str:
    if events and events[-1]["event"] == "user_inputs":
        return "paused"
    return "finished" if any(e["event"] == "workflow_finished" for e in events) else "stopped"


def _exit_loop(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    return "ExitLoop" in _kinds(case.dsl) and re.search(r"Loop:\w+: expected null", d.reason) is not None


def _error_sticks(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    return d.turn > 1 and _ending(oracle[d.turn - 2]) == "stopped"


def _targets(entry: dict) -> set[str]:
    params = entry["obj"]["params"]
    targets = set(entry.get("downstream") or [])
    for cond in params.get("conditions") or []:
        targets.update(cond.get("to") or [])
    targets.update(params.get("end_cpn_ids") or [])
    for cat in (params.get("category_description") or {}).values():
        targets.update(cat.get("to") or [])
    return targets


def _after(dsl: dict, start: set[str]) -> set[str]:
    """`start` and every component reachable from it."""
    comps, seen, todo = dsl["components"], set(start), list(start)
    while todo:
        for t in _targets(comps.get(todo.pop(), {"obj": {"params": {}}})):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def _join(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow runs a component with several upstream components as soon as one of them finishes (and again for
    the next): what differs names the join or what runs after it; an order difference elsewhere (inside a
    batch of parallel components, say) is not excused."""
    joins = {cid for cid, n in _upstreams(case.dsl).items() if n > 1}
    if not joins:
        return False
    comps = case.dsl["components"]
    started = [e["data"]["component_id"] for e in oracle[d.turn - 1] if e["event"] == "node_started"]
    # a join outside any container that RAGFlow ran more than once this turn (once per branch that reached it)
    again = {cid for cid in joins if started.count(cid) > 1 and not comps.get(cid, {}).get("parent_id")}
    named = set(ID.findall(d.reason))
    return bool(named & _after(case.dsl, joins)) or bool(again)


def _sticky_fillup(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    return d.turn > 2 and "UserFillUp" in _kinds(case.dsl)


def _unconsumed_stream(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow drops every later node_finished of the turn after an LLM or Agent stream nothing consumed; a turn
    that resumes a pause of that turn reads the dropped generation as empty (we run it, unseen)."""
    llms = {cid for cid, e in case.dsl["components"].items() if e["obj"]["component_name"] in ("LLM", "Agent")}
    turns = [d.turn - 1]
    while turns[0] > 0 and _ending(oracle[turns[0] - 1]) == "paused":      # the turns this one resumes
        turns.insert(0, turns[0] - 1)
    for n in turns:
        finished = {e["data"]["component_id"] for e in oracle[n] if e["event"] == "node_finished"}
        started = {e["data"]["component_id"] for e in oracle[n] if e["event"] == "node_started"}
        if llms & (started - finished):
            return True
    return False


def _read_unrun_generation(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """A RAGFlow component read an LLM's or Agent's unrun generation and failed on the generator object."""
    return any(e["event"] == "node_finished" and "functools.partial" in str((e.get("data") or {}).get("error") or "")
               for turn in oracle[:d.turn] for e in turn)


def _failed_stream_in_a_message(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow's Message consumed a generation that failed: the error is inside the Message, which goes on (a second
    mention runs the model again); we report the failure on its producer and stop the turn."""
    return any(e["event"] == "node_finished" and (e.get("data") or {}).get("component_type") in ("LLM", "Agent")
               and (e["data"].get("outputs") or {}).get("_ERROR") and (e["data"].get("outputs") or {}).get("content")
               for e in oracle[d.turn - 1])


def _producer_run_beside_a_message(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """A producer run by a reader in the Message's own batch: RAGFlow finishes it after that Message's stream (the
    batch ran before anything streamed); we stream the Message first and finish the producer once it has run."""
    return re.search(r'expected "node_finished:(LLM|Agent):[\w]+" got "node_finished:Message:', d.reason) is not None


def _reentered_container(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow keeps a container's pass counter in memory: a container inside another one that its turn entered
    again (once per outer pass) starts at its last item, or a Loop goes on counting towards its maximum."""
    comps = case.dsl["components"]
    containers = {cid for cid, e in comps.items() if e["obj"]["component_name"] in ("Iteration", "Loop")}
    nested = {cid for cid in containers if comps[cid].get("parent_id") in containers}
    started = [e["data"]["component_id"] for e in oracle[d.turn - 1] if e["event"] == "node_started"]
    return any(started.count(cid) > 1 for cid in nested)


def _form_in_a_batch(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """A UserFillUp that has a sibling (another downstream of one of its upstream components)."""
    comps = case.dsl["components"]
    forms = {cid for cid, e in comps.items() if e["obj"]["component_name"] == "UserFillUp"}
    return any(len(e.get("downstream") or []) > 1 and forms & set(e["downstream"]) for e in comps.values())


def _failed_container_unreported(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    return re.search(r"(Iteration|Loop):\w+: expected null got \[\{.*\"_ERROR\": true", d.reason) is not None


def _switch_empty_on_a_number(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow stops at a Switch testing `empty`/`not empty` on a number (float("") fails); we go on, so
    the rest of the turn differs (what the branch shows, what it computes, how the turn ends)."""
    testing_empty = set()
    for cid, e in case.dsl["components"].items():
        for cond in e["obj"]["params"].get("conditions") or [] if e["obj"]["component_name"] == "Switch" else []:
            if any(i.get("operator") in ("empty", "not empty") for i in cond.get("items") or []):
                testing_empty.add(cid)
    failed = {e["data"]["component_id"] for e in oracle[d.turn - 1]
              if e["event"] == "node_finished" and e["data"].get("component_id") in testing_empty
              and "float" in str(e["data"].get("error") or "")}
    return bool(failed) or (bool(testing_empty) and d.reason.startswith("text/"))


def _inner_container_last(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow ends the turn after one outer pass when a container without downstream is the last component
    of another container's body, and RAGFlow's turn ran such a container."""
    comps = case.dsl["components"]
    containers = {cid for cid, e in comps.items() if e["obj"]["component_name"] in ("Iteration", "Loop")}
    last = {cid for cid in containers if comps[cid].get("parent_id") in containers and not comps[cid].get("downstream")}
    ran = {e["data"]["component_id"] for e in oracle[d.turn - 1] if e["event"] == "node_started"}
    return bool(last & ran)


NOTICE = re.compile(r"Runningthe\w+tool\.\.\.")


def _repeated_notice(d: Difference, case: Case, oracle: list, ours: list) -> bool:
    """RAGFlow's stream splitter drops a "Running the X tool..." notice that repeats everything shown before
    it (the same tool called again before any other text); we show every notice. The texts (whitespace
    removed, as the checker compares them) agree once consecutive equal notices of ours count once."""
    if not d.reason.startswith("text/"):
        return False
    check = checker()

    def once(text: str) -> str:
        parts = [m.group(0) for m in re.finditer(r"Runningthe\w+tool\.\.\.|.", text)]
        out: list[str] = []
        for part in parts:
            if NOTICE.fullmatch(part) and out and out[-1] == part:
                continue
            out.append(part)
        return "".join(out)
    theirs, mine = check.texts(oracle[d.turn - 1]), check.texts(ours[d.turn - 1])
    return theirs != mine and [once(t) for t in theirs] == [once(t) for t in mine]


@dataclass
class Known:
    name: str
    row: str                        # a phrase of its row in docs/compatibility.md
    test: Callable[[Difference, Case, list, list], bool]


KNOWN = [
    Known("ExitLoop sends no node_finished for its Loop", "ExitLoop leaves the Loop without a `node_finished`", _exit_loop),
    Known("a failure's _ERROR survives into the next turn", "keeps its `_ERROR` into the next turn", _error_sticks),
    Known("no join barrier in RAGFlow", "No join barrier", _join),
    Known("a resumed UserFillUp stays the turn's entry", "After a UserFillUp has been resumed once", _sticky_fillup),
    Known("a Switch's empty/not empty on a number fails in RAGFlow", "`float(\"\")` fails the component",
          _switch_empty_on_a_number),
    Known("a nested container entered again keeps its pass counter in RAGFlow", "Iteration and Loop counters live "
          "in memory", _reentered_container),
    Known("a container last in another's body ends the turn after one outer pass in RAGFlow",
          "that is the last body component of an outer Loop or Iteration ends the outer container", _inner_container_last),
    Known("a failed container sends no node_finished in RAGFlow", "stops the turn with no `node_finished` for it",
          _failed_container_unreported),
    Known("a form beside other components pauses before they run in RAGFlow",
          "pauses before that batch runs", _form_in_a_batch),
    Known("a repeated tool notice is dropped from RAGFlow's stream", "notice that repeats, exactly, everything the "
          "stream showed before it is dropped", _repeated_notice),
    Known("a component reading an unrun generation fails on the generator in RAGFlow", "reads the unrun generator "
          "itself: a StringTransform fails", _read_unrun_generation),
    Known("an error in a streamed generation stays inside RAGFlow's Message", "An error in a streamed generation "
          "surfaces inside the Message that consumes it", _failed_stream_in_a_message),
    Known("a producer run beside a Message finishes before it in RAGFlow", "finishes that producer right after "
          "the Message's stream", _producer_run_beside_a_message),
    Known("an unconsumed LLM stream drops later node_finished events", "every later `node_finished` of the turn is dropped",
          _unconsumed_stream),
]


@dataclass
class Rewrite:
    """A documented difference in a value (not in what runs): RAGFlow's events are compared with it applied,
    as the parity cases apply their `deviations.json`, so that whatever else differs is still found."""
    name: str
    row: str                        # a phrase of its row in docs/compatibility.md
    pattern: re.Pattern
    replacement: str


REWRITES = [
    Rewrite("a streamed LLM's or Agent's content keeps its <think> block in RAGFlow", "keeps its thinking as text",
            re.compile(r"<think>.*?</think>", re.DOTALL), ""),
]


def _rewrite(value, rewrite: Rewrite, hits: list[int]):
    if isinstance(value, str):
        new, n = rewrite.pattern.subn(rewrite.replacement, value)
        hits[0] += n
        return new
    if isinstance(value, list):
        return [_rewrite(v, rewrite, hits) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite(v, rewrite, hits) for k, v in value.items()}
    return value


def documented(turns: list[list[dict]]) -> tuple[list[list[dict]], list[str]]:
    """RAGFlow's events per turn with every documented rewrite applied, and the names of those that changed
    something."""
    used = []
    for rewrite in REWRITES:
        hits = [0]
        turns = _rewrite(turns, rewrite, hits)
        if hits[0]:
            used.append(rewrite.name)
    return turns, used


def explain(d: Difference, case: Case, oracle: list, ours: list) -> Known | None:
    """The documented difference that explains `d` (between RAGFlow's events `oracle` and `ours`), or None."""
    for known in KNOWN:
        try:
            if known.test(d, case, oracle, ours):
                return known
        except (KeyError, IndexError, TypeError):
            continue
    return None

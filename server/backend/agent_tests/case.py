"""The regression case format, version 1: a folder with `case.json`, documented in docs/testing.md.

    my_case/
      case.json     {"format": "canvas2graph-case", "version": 1, "name": "...",
                     "dsl": "agent.json" | "agent": {"id": "...", "version": "..."},
                     "script": "script.json",
                     "turns": [{"query": "...", "inputs": {...}, "files": ["files/a.pdf"],
                                "expect": {"status", "answer", "path", "events", "components"}}]}
      agent.json    the DSL the case runs (unless `agent` names a stored agent)
      script.json   the models' and tools' replies (runtime/services/scripted.py's script format)
      files/        the files its turns upload

Everything a person reviews is in `case.json`; `load_case` checks it whole and names the field at fault
(a `CaseError`), so a broken case fails before anything runs. `save_case` writes it back with stable
formatting (two-space indent, keys in the documented order), which keeps a `--update` diff small.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from canvas2graph.server.backend.agent_tests.matching import KINDS, kind_of

__all__ = ["FORMAT", "VERSION", "CASE_FILE", "Case", "CaseError", "Turn", "load_case", "save_case", "is_case_file",
           "find_cases"]

FORMAT = "canvas2graph-case"
VERSION = 1
CASE_FILE = "case.json"
_CASE_KEYS = ("format", "version", "name", "description", "dsl", "agent", "script", "turns")
_TURN_KEYS = ("query", "inputs", "files", "expect")
_EXPECT_KEYS = ("status", "answer", "path", "events", "components")
_COMPONENT_KEYS = ("outputs", "messages")
STATUSES = ("finished", "paused", "failed", "cancelled", "running")


class CaseError(ValueError):
    """A case that cannot run: the message names the file and the field."""


@dataclass
class Turn:
    query: str = ""
    inputs: dict | None = None
    files: list[str] = field(default_factory=list)
    expect: dict = field(default_factory=dict)


@dataclass
class Case:
    folder: Path
    name: str
    turns: list[Turn]
    dsl: str | None = None              # a file in the folder
    agent: dict | None = None           # {"id", "version"?}: a stored agent instead
    script: Any = None                  # a file name in the folder, or the script itself
    description: str = ""
    raw: dict = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.folder / CASE_FILE

    def dsl_path(self) -> Path | None:
        return self.folder / self.dsl if self.dsl else None

    def script_data(self) -> Any:
        """The script's JSON (`{}` when the case has none: every model call then fails, naming the model)."""
        if self.script is None:
            return {}
        if not isinstance(self.script, str):
            return self.script
        path = self.folder / self.script
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise CaseError(f"{self.path}: `script`: cannot read {path}: {e.strerror or e}")
        except ValueError as e:
            raise CaseError(f"{self.path}: `script`: {path} is not valid JSON: {e}")


def is_case_file(path: Path) -> bool:
    """A `case.json` of this format (other tools' `case.json` files are left alone)."""
    if path.name != CASE_FILE:
        return False
    try:
        head = path.read_text(encoding="utf-8")[:4096]
    except (OSError, UnicodeDecodeError):
        return False
    return f'"{FORMAT}"' in head


def find_cases(paths: list[str]) -> list[Path]:
    """The case folders under these paths (a case folder, its case.json, or a folder of cases), sorted."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_file():
            path = path.parent
        if not path.exists():
            raise CaseError(f"{given}: no such file or folder")
        if (path / CASE_FILE).is_file():
            found.append(path)
            continue
        found += sorted(p.parent for p in path.rglob(CASE_FILE) if is_case_file(p))
    if not found:
        raise CaseError(f"no case folder (a folder with a {CASE_FILE} of format {FORMAT!r}) under {', '.join(paths)}")
    return list(dict.fromkeys(found))


def _fail(path: Path, where: str, message: str) -> CaseError:
    return CaseError(f"{path}: `{where}`: {message}")


def _check_matcher(path: Path, where: str, value: Any) -> None:
    kind, inner = kind_of(value)
    if kind == "regex" and not isinstance(inner, str):
        raise _fail(path, where, "a regex must be a string")
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) not in KINDS and where.endswith("answer"):
        raise _fail(path, where, f"an answer is text, or an object with one of {', '.join(KINDS)}")


def _check_expect(path: Path, where: str, expect: Any) -> dict:
    if not isinstance(expect, dict):
        raise _fail(path, where, "must be an object")
    unknown = [k for k in expect if k not in _EXPECT_KEYS]
    if unknown:
        raise _fail(path, where, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_EXPECT_KEYS)})")
    if "status" in expect and expect["status"] not in STATUSES:
        raise _fail(path, f"{where}.status", f"must be one of {', '.join(STATUSES)}")
    for key in ("answer", "path"):
        if key in expect:
            _check_matcher(path, f"{where}.{key}", expect[key])
    if "events" in expect and not (isinstance(expect["events"], list)
                                   and all(isinstance(e, dict) for e in expect["events"])):
        raise _fail(path, f"{where}.events", "must be a list of event patterns (objects)")
    components = expect.get("components", {})
    if not isinstance(components, dict):
        raise _fail(path, f"{where}.components", "must be an object of component id: expectations")
    for cid, spec in components.items():
        here = f"{where}.components.{cid}"
        if not isinstance(spec, dict) or any(k not in _COMPONENT_KEYS for k in spec):
            raise _fail(path, here, f"must be an object with {' and/or '.join(_COMPONENT_KEYS)}")
        if "outputs" in spec and not isinstance(spec["outputs"], dict):
            raise _fail(path, f"{here}.outputs", "must be an object of output name: expected value")
        for name, value in (spec.get("outputs") or {}).items():
            _check_matcher(path, f"{here}.outputs.{name}", value)
    return expect


def _check_turn(path: Path, index: int, raw: Any) -> Turn:
    where = f"turns[{index}]"
    if not isinstance(raw, dict):
        raise _fail(path, where, "must be an object with query, inputs, files and expect")
    unknown = [k for k in raw if k not in _TURN_KEYS]
    if unknown:
        raise _fail(path, where, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_TURN_KEYS)})")
    query = raw.get("query", "")
    if not isinstance(query, str):
        raise _fail(path, f"{where}.query", "must be text")
    inputs = raw.get("inputs")
    if inputs is not None and not isinstance(inputs, dict):
        raise _fail(path, f"{where}.inputs", "must be an object of field: value")
    files = raw.get("files") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise _fail(path, f"{where}.files", "must be a list of file names in the case folder")
    for name in files:
        if not (path.parent / name).is_file():
            raise _fail(path, f"{where}.files", f"{name} is not a file in {path.parent}")
    return Turn(query=query, inputs=inputs, files=files, expect=_check_expect(path, f"{where}.expect", raw.get("expect", {})))


def load_case(folder: str | Path) -> Case:
    """Read and check a case folder (or its case.json)."""
    folder = Path(folder)
    if folder.name == CASE_FILE:
        folder = folder.parent
    path = folder / CASE_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CaseError(f"{path}: cannot read: {e.strerror or e}")
    except ValueError as e:
        raise CaseError(f"{path}: not valid JSON: {e}")
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CaseError(f"{path}: `format`: must be {FORMAT!r} (a canvas2graph regression case)")
    if raw.get("version") != VERSION:
        raise _fail(path, "version", f"this canvas2graph reads case format version {VERSION}, not {raw.get('version')!r}")
    unknown = [k for k in raw if k not in _CASE_KEYS]
    if unknown:
        raise _fail(path, unknown[0], f"unknown key (known: {', '.join(_CASE_KEYS)})")
    dsl, agent = raw.get("dsl"), raw.get("agent")
    if (dsl is None) == (agent is None):
        raise _fail(path, "dsl", "give the DSL file (`dsl`) or a stored agent (`agent`: {\"id\": ...}), one of them")
    if dsl is not None and not (isinstance(dsl, str) and (folder / dsl).is_file()):
        raise _fail(path, "dsl", f"{dsl!r} is not a file in {folder}")
    if agent is not None and not (isinstance(agent, dict) and isinstance(agent.get("id"), str)):
        raise _fail(path, "agent", 'must be {"id": "<agent id>"} with an optional "version"')
    script = raw.get("script")
    if script is not None and not isinstance(script, (str, dict, list)):
        raise _fail(path, "script", "must be a file name in the case folder, or the script itself")
    turns = raw.get("turns")
    if not isinstance(turns, list) or not turns:
        raise _fail(path, "turns", "must be a non-empty list of turns")
    return Case(folder=folder, name=str(raw.get("name") or folder.name), turns=[_check_turn(path, i, t)
                for i, t in enumerate(turns)], dsl=dsl, agent=agent, script=script,
                description=str(raw.get("description") or ""), raw=raw)


def case_json(case: Case) -> dict:
    """The case as its file holds it, keys in the documented order."""
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": case.name}
    if case.description:
        out["description"] = case.description
    if case.dsl:
        out["dsl"] = case.dsl
    else:
        out["agent"] = case.agent
    if case.script is not None:
        out["script"] = case.script
    out["turns"] = []
    for turn in case.turns:
        item: dict[str, Any] = {"query": turn.query}
        if turn.inputs:
            item["inputs"] = turn.inputs
        if turn.files:
            item["files"] = turn.files
        item["expect"] = {k: turn.expect[k] for k in _EXPECT_KEYS if k in turn.expect}
        out["turns"].append(item)
    return out


def save_case(case: Case) -> Path:
    case.folder.mkdir(parents=True, exist_ok=True)
    case.path.write_text(json.dumps(case_json(case), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return case.path

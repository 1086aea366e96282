"""How `canvas2graph run` shows a turn: RAGFlow's events as JSON lines, or a live view for people."""
from __future__ import annotations

import json
import os
import sys


class JsonlPrinter:
    """One event per line, flushed at once so tokens reach the reader while the model writes."""

    def event(self, event: dict) -> None:
        sys.stdout.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def note(self, text: str) -> None:
        print(text, file=sys.stderr)

    def done(self, outcome) -> None:
        if outcome.error:
            print(f"stopped: {outcome.error}", file=sys.stderr)


class PrettyPrinter:
    """A live view for people: steps, streamed text and the outcome, coloured on a terminal."""

    def __init__(self, session: str):
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self.in_message = False
        self.session = session
        self.out(self.c("2", f"session {session}") + "\n")

    def c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def out(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def _end_message(self) -> None:
        if self.in_message:
            self.out("\n")
            self.in_message = False

    def event(self, e: dict) -> None:
        kind, d = e["event"], e["data"]
        if kind == "node_started":
            self._end_message()
            name = d.get("component_name") or d["component_id"]
            self.out(self.c("36", f"▶ {name}") + self.c("2", f" ({d['component_type']})") + "\n")
        elif kind == "node_finished":
            self._end_message()
            mark = self.c("31", "✗") if d.get("error") else self.c("32", "✓")
            shown = {k: v for k, v in d["outputs"].items() if not k.startswith("_")}
            text = json.dumps(shown, ensure_ascii=False, default=str)
            self.out(f"{mark} {d.get('component_name') or d['component_id']} "
                     + self.c("2", f"{d['elapsed_time'] * 1000:.0f} ms ") + self.c("2", text[:200]) + "\n")
            if d.get("error"):
                self.out(self.c("31", f"  error: {d['error']}") + "\n")
        elif kind == "message":
            if d.get("start_to_think"):
                self.out(self.c("2;3", "[thinking] "))
            elif d.get("end_to_think"):
                self.out(self.c("2;3", " [/thinking] "))
            else:
                if not self.in_message:
                    self.out(self.c("1", "│ "))
                    self.in_message = True
                self.out(d.get("content", "").replace("\n", "\n│ "))
        elif kind == "message_end":
            self._end_message()
        elif kind == "user_inputs":
            self._end_message()
            self.out(self.c("33", f"? {d.get('tips', '')}") + "\n")
            for key, spec in (d.get("inputs") or {}).items():
                self.out(self.c("33", f"  - {key} ({spec.get('type', 'line')})") + "\n")
        elif kind == "workflow_finished" and not isinstance(d.get("outputs"), dict):
            self._end_message()
            self.out(self.c("33", f"■ {d.get('outputs')}") + "\n")
        elif kind == "workflow_finished":
            self._end_message()
            u = d.get("usage") or {}
            self.out(self.c("32", f"■ finished in {d['elapsed_time']:.2f} s") +
                     self.c("2", f", {u.get('calls', 0)} model call(s), {u.get('total_tokens', 0)} tokens") + "\n")

    def note(self, text: str) -> None:
        self._end_message()
        self.out(self.c("33", text) + "\n")

    def done(self, outcome) -> None:
        self._end_message()
        if outcome.status == "paused":
            self.out(self.c("33", f"■ paused: answer with --session {self.session} --inputs FILE") + "\n")
        if outcome.status == "stopped":
            self.out(self.c("31", f"■ stopped: {outcome.error or 'the run ended early'}") + "\n")

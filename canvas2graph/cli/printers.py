"""How `canvas2graph run` shows a turn: RAGFlow's events as JSON lines, or a live view for people.

The live view:

    ▶ Billing desk (LLM)
    ▶ Answer (Message)
    │ Desk: (billing)
    │ You were charged twice because ...
    ✓ Billing desk 9 ms {"content": "You were charged twice because the first payment timed…"}

Streamed text gets a margin at the start of each of its lines (never a dangling one), a model's
reasoning is kept apart from the answer (shown dimmed in its own block with `--show-thinking`, left
out otherwise), and summaries are shortened at a word with an ellipsis.
"""
from __future__ import annotations

import json
import os
import re
import sys

SUMMARY_CHARS = 160
ANSWER_MARGIN = "│ "
THINKING_MARGIN = "┆ "
# what an Agent streams, inside its thinking, when it calls a tool (nodes/agent.py): shown even when the
# reasoning is hidden, so that a run says which tools ran (the data analyst's code, say)
TOOL_NOTICE = re.compile(r"Running the \S+ tool\.\.\.")


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    """`text` on one line, cut at a word boundary with an ellipsis when longer than `limit`."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


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

    def __init__(self, session: str, *, show_thinking: bool = False):
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self.show_thinking = show_thinking
        self.session = session
        self.block: str | None = None       # the streamed block being written: "answer" or "thinking"
        self.at_line_start = True
        self.thinking = False               # inside the model's reasoning
        self.hid_thinking = False
        self.started = False                # the session line waits for the first event: a run refused
                                            # before it starts (no --query, say) prints no session


    def c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def out(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    # --- streamed text ---------------------------------------------------------------------------
    def _end_block(self) -> None:
        if self.block is not None and not self.at_line_start:
            self.out("\n")
        self.block = None
        self.at_line_start = True

    def _stream(self, text: str, block: str) -> None:
        """Write `text` inside a block; each line gets the block's margin when its first character comes."""
        if self.block != block:
            self._end_block()
            self.block = block
        margin = ANSWER_MARGIN if block == "answer" else THINKING_MARGIN
        style = "" if block == "answer" else "2;3"
        for line in text.splitlines(keepends=True):
            if self.at_line_start:
                self.out(self.c("2", margin))
            body = line.rstrip("\n")
            if body:
                self.out(self.c(style, body) if style else body)
            self.at_line_start = line.endswith("\n")
            if self.at_line_start:
                self.out("\n")

    def _message(self, d: dict) -> None:
        if d.get("start_to_think"):
            self.thinking = True
            return
        if d.get("end_to_think"):
            self.thinking = False
            return
        text = d.get("content") or ""
        if not text:
            return
        if not self.thinking:
            self._stream(text, "answer")
        elif self.show_thinking:
            self._stream(text, "thinking")
        elif TOOL_NOTICE.fullmatch(text.strip()):
            self._end_block()
            self.out(self.c("2", THINKING_MARGIN) + self.c("2;3", text.strip()) + "\n")
        elif not self.hid_thinking:
            self.hid_thinking = True
            self._end_block()
            self.out(self.c("2", f"{THINKING_MARGIN}(the model's reasoning is hidden: --show-thinking shows it)") + "\n")

    # --- events --------------------------------------------------------------------------------------
    def event(self, e: dict) -> None:
        if not self.started:
            self.started = True
            self.out(self.c("2", f"session {self.session}") + "\n")
        kind, d = e["event"], e["data"]
        if kind == "message":
            self._message(d)
            return
        self._end_block()
        if kind == "node_started":
            name = d.get("component_name") or d["component_id"]
            self.out(self.c("36", f"▶ {name}") + self.c("2", f" ({d['component_type']})") + "\n")
        elif kind == "node_finished":
            mark = self.c("31", "✗") if d.get("error") else self.c("32", "✓")
            summary = shorten(json.dumps(self._shown(d), ensure_ascii=False, default=str))
            self.out(f"{mark} {d.get('component_name') or d['component_id']} "
                     + self.c("2", f"{(d.get('elapsed_time') or 0) * 1000:.0f} ms ") + self.c("2", summary) + "\n")
            if d.get("error"):
                self.out(self.c("31", f"  error: {d['error']}") + "\n")
        elif kind == "user_inputs":
            self.out(self.c("33", f"? {d.get('tips', '')}") + "\n")
            for key, spec in (d.get("inputs") or {}).items():
                kind_of = spec.get("type", "line") if isinstance(spec, dict) else "line"
                self.out(self.c("33", f"  - {key} ({kind_of})") + "\n")
        elif kind == "workflow_finished" and not isinstance(d.get("outputs"), dict):
            self.out(self.c("33", f"■ {d.get('outputs')}") + "\n")
        elif kind == "workflow_finished":
            u = d.get("usage") or {}
            self.out(self.c("32", f"■ finished in {d['elapsed_time']:.2f} s") +
                     self.c("2", f", {u.get('calls', 0)} model call(s), {u.get('total_tokens', 0)} tokens") + "\n")

    @staticmethod
    def _shown(d: dict) -> dict:
        """The outputs worth a summary: no timings, and not a Message's text, which was just streamed
        (with the reasoning inside it, as RAGFlow reports it)."""
        outputs = d.get("outputs") if isinstance(d.get("outputs"), dict) else {}
        skip = {"content"} if d.get("component_type") == "Message" else set()
        return {k: v for k, v in outputs.items() if not k.startswith("_") and k not in skip}

    def note(self, text: str) -> None:
        self._end_block()
        self.out(self.c("33", text) + "\n")

    def done(self, outcome) -> None:
        self._end_block()
        if outcome.status == "paused":
            self.out(self.c("33", f"■ paused: answer with --session {self.session} --inputs FILE") + "\n")
        if outcome.status == "stopped":
            self.out(self.c("31", f"■ stopped: {outcome.error or 'the run ended early'}") + "\n")

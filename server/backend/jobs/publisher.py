"""A running turn's events on their way to the event log, and the answer they add up to.

`Publisher` takes events as the turn makes them and appends them to the log in batches: whatever came while
the previous batch was being written goes in the next one, so a busy turn writes one batch per round trip,
never one per token, and a quiet one writes each event at once. On SQLite, whose writes take no round trip,
a batch is what came in the log's `linger` (a few milliseconds).

`AnswerFold` adds the events up to what the message log keeps: the answer's text (think markers put back),
its references and usage. A turn taken over by another worker streams again the step that was running when
its worker died; what that step had streamed is dropped at the `attempt` record, so the answer holds it once.
"""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from canvas2graph.server.backend.answer_text import message_text
from canvas2graph.server.backend.jobs.event_log import EventLog
from canvas2graph.server.backend.jobs.wire import TURN_EVENT


class Publisher:
    def __init__(self, log: EventLog, turn_id: str, seq: int = 0):
        self.log, self.turn_id, self.seq = log, turn_id, seq
        self.buffer: list[dict] = []
        # the batch being written: kept apart until it is in, so a retry writes the very same batch at the same
        # position (a write that landed but whose answer was lost is then a no-op, never a gap)
        self.pending: list[dict] | None = None
        self.ready = asyncio.Event()
        self.error: BaseException | None = None
        self.closing = False
        self._task = asyncio.create_task(self._flush_forever(), name=f"publish-{turn_id}")

    def put(self, event: dict) -> None:
        self.buffer.append(event)
        self.ready.set()

    async def _flush_forever(self) -> None:
        while not self.closing:
            await self.ready.wait()
            if self.log.linger and not self.closing:    # a log whose writes do not wait (SQLite's) batches by time
                await asyncio.sleep(self.log.linger)
            await self._flush()

    async def _flush(self) -> None:
        self.ready.clear()
        if self.pending is None:
            self.pending, self.buffer = self.buffer, []
        if not self.pending:
            self.pending = None
            return
        try:
            self.seq = await self.log.append(self.turn_id, self.seq, self.pending)
            self.pending = None
        except Exception as e:      # noqa: BLE001 - the database is away: the same batch goes again
            self.error = e
            await asyncio.sleep(0.5)
            self.ready.set()

    async def close(self, timeout: float = 60.0) -> None:
        """Write what is left (retrying while the database is away, up to `timeout` seconds).

        The batch being written when it is called is let finish: cancelling it mid-write would lose it (and
        with it, as like as not, the turn's last events)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.closing = True
        self.ready.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while (self.buffer or self.pending) and loop.time() < deadline:
            await self._flush()
        if self.buffer or self.pending:
            left = len(self.buffer) + len(self.pending or ())
            raise RuntimeError(f"turn {self.turn_id}: {left} events could not be logged ({self.error})")


@dataclass
class AnswerFold:
    """What a turn's events add up to, per message id (a turn finishing an interrupted one first has two).

    At a takeover (`attempt` record) the text a message had streamed since its last logged `node_finished` is
    put aside, with the component that was streaming it. Whether the new worker streams it again depends on the
    checkpoint, not on the log: when that component starts again, its step is re-run and the text put aside is
    dropped (it comes again); when another component streams into the message or the turn ends first, the step
    had finished before the kill (its checkpoint landed, its `node_finished` did not reach the log) and the text
    is kept, in its place."""
    answers: dict[str, str] = field(default_factory=dict)        # message id -> text streamed and kept
    tails: dict[str, str] = field(default_factory=dict)          # ... streamed since its last finished component
    streaming: dict[str, str] = field(default_factory=dict)      # message id -> the component last started in it
    aside: dict[str, tuple[str, str]] = field(default_factory=dict)  # ... (component, text) put aside at a takeover
    reference: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)
    started: bool = False
    finished: set[str] = field(default_factory=set)             # message ids whose workflow_finished came

    def add(self, event: dict) -> None:
        kind, data = event.get("event"), event.get("data") or {}
        if kind == TURN_EVENT:
            if event.get("kind") == "attempt":
                for message_id, text in self.tails.items():
                    if text:
                        self.aside[message_id] = (self.streaming.get(message_id, ""), text)
                self.tails.clear()
                self.streaming.clear()
            return
        self.started = True
        message_id = event.get("message_id") or ""
        if kind == "node_started":
            self.streaming[message_id] = data.get("component_id") or ""
            if message_id in self.aside and self.aside[message_id][0] == self.streaming[message_id]:
                del self.aside[message_id]                      # its step runs again: its text comes again
        elif kind in ("message", "workflow_finished") and message_id in self.aside:
            self.answers[message_id] = self.answers.get(message_id, "") + self.aside.pop(message_id)[1]
        if kind == "message":
            self.tails[message_id] = self.tails.get(message_id, "") + message_text(data)
        elif kind == "node_finished":
            self._keep(message_id)
        elif kind == "message_end" and isinstance(data.get("reference"), dict):
            self.reference.update(data["reference"])
        elif kind == "workflow_finished":
            self.finished.add(message_id)
            self._keep(message_id)
            if isinstance(data.get("usage"), dict):
                self.usage = dict(data["usage"])

    def _keep(self, message_id: str) -> None:
        self.answers[message_id] = self.answers.get(message_id, "") + self.tails.pop(message_id, "")

    def answer(self, message_id: str) -> str:
        aside = self.aside.get(message_id, ("", ""))[1]           # nothing came after the takeover: it stands
        return self.answers.get(message_id, "") + aside + self.tails.get(message_id, "")

    def message_ids(self) -> list[str]:
        return list(dict.fromkeys([*self.answers, *self.aside, *self.tails]))

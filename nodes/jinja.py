"""Jinja templates written in a DSL (Message content, StringTransform scripts), rendered within bounds.

RAGFlow renders these with Jinja; a canvas is data someone else may have written, so rendering runs
in Jinja's sandbox (no attribute tricks) and within a time and a size budget: a template such as
`{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}` or
`{{ 'x' * 10**9 }}` stops with an error that names the bound instead of taking the process with it.
"""
from __future__ import annotations

import operator
import os
import sys
import time
from typing import Any

from jinja2.sandbox import SandboxedEnvironment

from canvas2graph.runtime.graph.values import max_output_chars

DEFAULT_SECONDS = 5.0
MAX_EXPONENT = 1000              # 10 ** 10 ** 6 is a million-digit integer: seconds of CPU for nothing
_TEMPLATE_CODE = "<template>"    # the file name Jinja compiles templates under


def render_seconds() -> float:
    """CANVAS2GRAPH_TEMPLATE_SECONDS: the time one Jinja rendering may take (default 5)."""
    try:
        return max(0.1, float(os.environ.get("CANVAS2GRAPH_TEMPLATE_SECONDS", DEFAULT_SECONDS)))
    except ValueError:
        return DEFAULT_SECONDS


class TemplateLimit(ValueError):
    """A template went past its time or size budget."""


class BoundedEnvironment(SandboxedEnvironment):
    """The sandbox, refusing arithmetic whose result alone would pass the size budget."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, op: str, left: Any, right: Any) -> Any:
        if op == "*":
            size = _repeat_size(left, right) or _repeat_size(right, left)
            if size > max_output_chars():
                raise TemplateLimit(f"a repetition of {size:,} characters passes the size bound of "
                                    f"{max_output_chars():,} (CANVAS2GRAPH_MAX_OUTPUT_CHARS)")
            return operator.mul(left, right)
        if op == "**":
            if isinstance(right, int) and abs(right) > MAX_EXPONENT and isinstance(left, int) and abs(left) > 1:
                raise TemplateLimit(f"exponents above {MAX_EXPONENT} are refused in templates")
            return operator.pow(left, right)
        return super().call_binop(context, op, left, right)


def _repeat_size(sequence: Any, times: Any) -> int:
    if isinstance(sequence, (str, list, tuple)) and isinstance(times, int) and not isinstance(times, bool):
        return len(sequence) * max(times, 0)
    return 0


ENVIRONMENT = BoundedEnvironment()


def compile_template(text: str):
    """A Jinja template (raises jinja2's TemplateSyntaxError, or RecursionError for absurd nesting)."""
    return ENVIRONMENT.from_string(text)


def render(template, values: dict[str, Any]) -> str:
    """Render within `render_seconds()` and `max_output_chars()`, or raise TemplateLimit naming the bound."""
    seconds, limit = render_seconds(), max_output_chars()
    deadline = time.monotonic() + seconds
    pieces: list[str] = []
    size = 0
    with _deadline(deadline, seconds):
        for piece in template.generate(**values):
            size += len(piece)
            if size > limit:
                raise TemplateLimit(f"the template's text passes {limit:,} characters (CANVAS2GRAPH_MAX_OUTPUT_CHARS)")
            pieces.append(piece)
    return "".join(pieces)


class _deadline:
    """Checks the clock while a template's own code runs (a loop that writes nothing yields nothing to
    check between): a line tracer on the template's frames only, on this thread only."""

    def __init__(self, deadline: float, seconds: float):
        self.deadline, self.seconds, self.count = deadline, seconds, 0

    def __enter__(self):
        self.previous = sys.gettrace()
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc) -> None:
        sys.settrace(self.previous)

    def _call(self, frame, event, arg):
        if frame.f_code.co_filename == _TEMPLATE_CODE:
            return self._line
        return None

    def _line(self, frame, event, arg):
        self.count += 1
        if self.count % 256 == 0 and time.monotonic() > self.deadline:
            raise TemplateLimit(f"the template ran longer than {self.seconds:g} s (CANVAS2GRAPH_TEMPLATE_SECONDS)")
        return self._line


def replace_names(text: str, names: dict[str, str]) -> str:
    """RAGFlow's last step after Jinja: every name replaced by its value's text, one name after the
    other (a value holding a later name gets that replaced too), within the size bound."""
    limit = max_output_chars()
    for name, value in names.items():
        count = text.count(name) if name else 0
        if not count:
            continue
        if len(text) + count * (len(value) - len(name)) > limit:
            raise TemplateLimit(f"the text passes {limit:,} characters (CANVAS2GRAPH_MAX_OUTPUT_CHARS)")
        text = text.replace(name, value)
    return text

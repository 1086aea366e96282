"""What a run hands to every node besides the state: models, the script, and services.

It travels as LangGraph's run `context`, so one compiled graph serves any configuration.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.models import ModelFactory
    from runtime.scripted import Script


@dataclass
class RunContext:
    models: "ModelFactory"
    script: "Script | None" = None
    session_id: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    cancel_requested: bool = False      # set by Runner.cancel(); nodes check it before they start


class TurnCancelled(Exception):
    """Raised at a node boundary after the turn was cancelled."""

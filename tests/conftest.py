"""Shared test helpers.

Tests that read `../shared` (RAGFlow's recorded traces, templates) run in CI and fail there when it is
missing; in a user's clone without it they skip, saying why.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """`../shared` beside the checkout, or skip (fail under CI=true) when it is absent."""
    path = REPO.parent / "shared"
    if not path.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing: CI must run with shared/ beside the checkout")
        pytest.skip(f"{path} is absent: the RAGFlow reference material lives outside this repository")
    return path

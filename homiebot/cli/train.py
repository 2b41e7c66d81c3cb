"""``homie train ...``: planner training on trl and peft (docs/training.md)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``homie train`` (its commands come with homiebot.training.trainer)."""
    del app

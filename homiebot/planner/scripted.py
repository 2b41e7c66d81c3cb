"""A planner that replays a fixed list of raw answers, one per round.

Used to replay recorded or published trajectories (EMMOE appendix I case studies) through the real
loop, to fuzz the loop with malformed answers, and to drive ROS 2 graph tests deterministically.

Decision: when the script runs out, the planner answers ``[End]`` (``on_exhausted="end"``, the default,
so an episode always terminates), or raises :class:`ScriptExhausted` (``on_exhausted="error"``).
A script file is either a JSON list of strings or a text file whose answers are separated by lines
holding only ``---``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from homiebot.planner.base import Planner, PlanRequest

END_ANSWER = "Analysis: The script has no more subtasks, so its time to end\nSubtask: [End]\nModel: None"


class ScriptExhausted(RuntimeError):
    """The scripted planner was asked for more rounds than its script holds."""


def load_script(path: str | Path) -> list[str]:
    """Read a script file: a JSON list of answers, or text answers separated by ``---`` lines."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"script file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise ValueError(f"{path}: a JSON script must be a list of strings")
        return data
    answers: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip() == "---":
            answers.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    if "\n".join(current).strip():
        answers.append("\n".join(current).strip())
    return [a for a in answers if a]


class ScriptedPlanner(Planner):
    """Replays ``outputs`` in order; ``path`` loads them from a script file instead."""

    name = "scripted"
    privileged = False
    accepts_free_text = True

    def __init__(
        self,
        outputs: Sequence[str] | None = None,
        path: str | Path | None = None,
        on_exhausted: Literal["end", "error"] = "end",
    ) -> None:
        if (outputs is None) == (path is None):
            raise ValueError("give the scripted planner either outputs or a script path")
        if on_exhausted not in ("end", "error"):
            raise ValueError(f"on_exhausted must be 'end' or 'error', got {on_exhausted!r}")
        self.outputs: list[str] = list(outputs) if outputs is not None else load_script(path)  # type: ignore[arg-type]
        self.on_exhausted = on_exhausted
        self.position = 0
        self.requests: list[PlanRequest] = []  # what it was asked, for tests and replays

    def reset(self, task: str, seed: int = 0) -> None:
        self.position = 0
        self.requests = []

    def plan(self, request: PlanRequest) -> str:
        self.requests.append(request)
        if self.position >= len(self.outputs):
            if self.on_exhausted == "error":
                raise ScriptExhausted(f"the script has only {len(self.outputs)} answers")
            return END_ANSWER
        answer = self.outputs[self.position]
        self.position += 1
        return answer

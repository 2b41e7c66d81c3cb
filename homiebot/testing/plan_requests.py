"""Planner requests for the backend tests: four random views, an EMMOE instruction, optional history turns."""

from __future__ import annotations

import numpy as np

from homiebot.planner.base import ChatTurn, PlanRequest
from homiebot.planner.prompt import build_instruction, system_prompt

GROUNDED = ("fridge", "apple", "kitchen table", "cabinet")
TASK = "put the apple in the fridge"


def make_request(
    seed: int = 0,
    history: int = 0,
    targets: tuple[str, ...] = GROUNDED,
    size: int = 64,
    system: str | None = None,
    task: str = TASK,
) -> PlanRequest:
    """Images drawn from ``seed``; ``history`` earlier rounds of the same Go to; ``targets`` grounded."""
    rng = np.random.default_rng(seed)
    turns = [
        ChatTurn(build_instruction(TASK, [], "", "None"), "Analysis: go first\nSubtask: [Go to, fridge]\nModel: NoMaD")
        for _ in range(history)
    ]
    return PlanRequest(
        system_prompt=system or system_prompt(),
        instruction=build_instruction(task, [], "(1) Go to, fridge(success) " * history, "None"),
        images=[rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(4)],
        history=turns,
        grounded_targets=targets,
    )

"""A failed physical Pick that left its object out of the hand and away from where it was says where it is now.

EMMOE-100's emmoe-081: the can came out of the hand above the base when the arm stopped on the way back, and the
Pick said only that the arm had stopped; the planner was not told where the can had gone.
"""

from __future__ import annotations

import dataclasses

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task
from homiebot.types import SkillResult, SkillStatus


def test_a_failed_pick_says_where_the_knocked_object_came_to_rest(sim):
    task = get_task("emmoe-081")
    sim.reset(task.scene, seed=task.seed)
    manipulation = PhysicalSkillSet(sim).manipulation
    now = sim.state()
    can = now.entities["green_can_2"]
    assert can.parent == "tv_stand"
    failed = SkillResult(SkillStatus.EXECUTION_FAILED, "the arm stopped while carrying green_can_2: ...")
    # Where the Pick found it: 30 cm off where it is now (the can was moved while the skill ran).
    x, y, z = can.position
    before = dataclasses.replace(now, entities={**now.entities, "green_can_2": dataclasses.replace(
        can, position=(x + 0.3, y, z))})
    said = manipulation._knocked(failed, before, "green_can_2")
    assert said.status is SkillStatus.EXECUTION_FAILED
    assert said.detail.startswith(failed.detail)
    assert f"green_can_2 was knocked out of place: it is on tv_stand at ({x:.2f}, {y:.2f}, {z:.2f})" in said.detail
    # Where it was: nothing added.
    assert manipulation._knocked(failed, now, "green_can_2") == failed

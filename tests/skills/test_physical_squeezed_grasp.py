"""A gripper goal that times out short of closed, its fingers still creeping into a squeezed can, holds the can.

EMMOE-100's emmoe-081: the fingers closed on green_can_2 and were still moving (faster than the stall speed) when
the 2 s goal ended, so the grasp helper did not weld the can; it came along pinched but colliding with the arm as a
free object, jammed the tuck, and later fell out (first through the floor, then onto the base).

Scene: emmoe-081 (apartment_1 at its task seed), green_can_2 on the TV stand.
"""

from __future__ import annotations

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task
from homiebot.types import Action


def test_emmoe_081s_can_squeezed_until_the_goal_times_out_is_held_and_carried_to_the_tuck(sim):
    task = get_task("emmoe-081")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "green_can_2").success
    picked = skills.run(Action.PICK, "oracle", "green_can_2")
    assert picked.success, picked.detail  # was: "the arm stopped while carrying green_can_2 ... (blocked: green_can_2)"
    assert sim.state().held == "green_can_2"
    assert skills.driver.held() == "green_can_2"

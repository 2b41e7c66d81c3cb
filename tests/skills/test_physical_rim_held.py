"""A Pick's outcome is the grasp's: the object the hand holds at the end, not the fingers' gap alone.

EMMOE-100's emmoe-050 through perception: the bowl taken by its 2 cm rim was carried to the tuck in the grasp while the
fingers closed to 0.3 mm, so the Pick, judging by the gap, reported "slipped out of the gripper" (E1) with the bowl in
the hand. The executor's inventory stayed empty: every Put was refused (L2, the hand is empty) and every Pick too (L1,
the hand is full), until the round limit.

Scene: emmoe-050 (apartment_5 at its task seed), bowl_1 on the kitchen counter. The fingers' joints are reported shut
after the grasp, as they were in that episode.
"""

from __future__ import annotations

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical.manipulation import PhysicalManipulation
from homiebot.tasks.suite import get_task
from homiebot.types import Action


def test_emmoe_050s_bowl_held_by_the_grasp_with_the_fingers_shut_is_picked(sim, monkeypatch):
    task = get_task("emmoe-050")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "bowl_1").success
    monkeypatch.setattr(PhysicalManipulation, "_gap", lambda self: 0.0)  # the fingers as they read in the episode
    picked = skills.run(Action.PICK, "oracle", "bowl_1")
    assert skills.driver.held() == "bowl_1" and sim.state().held == "bowl_1"
    assert picked.success, picked.detail  # was: "bowl_1 slipped out of the gripper on the way back"

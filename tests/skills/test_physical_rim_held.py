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


def test_a_physical_put_says_where_the_hand_let_go(sim):
    """The released point (SkillResult.released_at) is where the object then rests, within the fall from the
    release height; the image-built graph places it there (emmoe-089's sponge against the sink's front wall)."""
    task = get_task("emmoe-089")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.PICK, "oracle", "sponge").success
    assert skills.run(Action.GO_TO, "oracle", "sink").success
    put = skills.run(Action.PUT, "oracle", "sponge", "sink")
    assert put.success and put.released_at is not None, put.detail
    rest = sim.state().entities["sponge"].position
    assert abs(put.released_at[0] - rest[0]) < 0.03 and abs(put.released_at[1] - rest[1]) < 0.03
    assert 0.0 <= put.released_at[2] - rest[2] < 0.05

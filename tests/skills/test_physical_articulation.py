"""Open and Close through the arm (``PhysicalSkillSet(articulation="physical")``, homiebot/skills/physical/articulation.py):
the gripper closes on the handle, the arm pulls or pushes it along the door's arc or the drawer's line under physics,
and where the joint ends is the simulator's state (is_open from half its range). Nothing is written kinematically: a
drawer pulled by the arm stops short of its end, a door where the arm left it.

Scenes: EMMOE-100's emmoe-005 (apartment_6: a 0.8 m kitchen drawer that slides 0.45 m out) and emmoe-001
(apartment_2: a 0.8 m fridge door hinged on its left, 1.6 rad).
"""

from __future__ import annotations

import math

import pytest

from homiebot.skills.physical import PhysicalSkillSet, articulation
from homiebot.skills.physical.skillset import ARTICULATION
from homiebot.tasks.suite import get_task
from homiebot.types import Action, SkillStatus


def _at(sim, task_id: str, piece: str) -> PhysicalSkillSet:
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, articulation="physical")
    assert skills.run(Action.GO_TO, "oracle", piece).success
    return skills


def test_the_default_is_the_oracle_and_an_unknown_setting_is_refused(sim):
    task = get_task("emmoe-005")
    sim.reset(task.scene, seed=task.seed)
    assert ARTICULATION == "oracle"
    assert PhysicalSkillSet(sim).articulation_mode == "oracle"
    with pytest.raises(ValueError, match="articulation"):
        PhysicalSkillSet(sim, articulation="teleport")


def test_a_drawer_is_pulled_open_and_pushed_shut_by_its_handle(sim):
    skills = _at(sim, "emmoe-005", "kitchen_drawer")
    assert skills.driver.articulation_joint("kitchen_drawer") == 0.0
    opened = skills.run(Action.OPEN, "oracle", "kitchen_drawer")
    assert opened.success, opened.detail
    assert "with the gripper" in opened.detail
    slide = skills.driver.articulation_joint("kitchen_drawer")
    # Pulled by the arm to 85 % of the interior's depth (0.52 m): 0.44 m, short of the slide's 0.45 m end, where the
    # oracle would have put it.
    assert 0.35 < slide < 0.449
    state = sim.state().entities["kitchen_drawer"]
    assert state.is_open
    # The world graph's interior rides the tray out as far as it went.
    assert skills.driver.held_leaf() is None  # let go once done
    closed = skills.run(Action.CLOSE, "oracle", "kitchen_drawer")
    assert closed.success, closed.detail
    assert skills.driver.articulation_joint("kitchen_drawer") < 0.03
    assert not sim.state().entities["kitchen_drawer"].is_open


def test_a_fridge_door_is_pulled_round_its_hinge_and_closed_again(sim, monkeypatch):
    # One pull from one base pose (the first segment): the door turns about 1 rad, past half its range, so the
    # world graph says open and the skill is done.
    monkeypatch.setattr(articulation, "MAX_SEGMENTS", 1)
    skills = _at(sim, "emmoe-001", "fridge")
    opened = skills.run(Action.OPEN, "oracle", "fridge")
    assert opened.success, opened.detail
    angle = skills.driver.articulation_joint("fridge")
    assert 0.8 < angle < 1.55
    assert sim.state().entities["fridge"].is_open
    # The hinge side (the door's free edge towards +x: hinged on the left, by the wall) was tried first, as the side
    # with less room beside the front, and kept.
    assert skills.articulation._memory["fridge"][0] == 1
    # Shut by its free edge, then pushed by its outer face the rest of the way (as many segments as it takes).
    monkeypatch.setattr(articulation, "MAX_SEGMENTS", 4)
    closed = skills.run(Action.CLOSE, "oracle", "fridge")
    assert closed.success, closed.detail
    assert skills.driver.articulation_joint("fridge") < 0.16
    assert not sim.state().entities["fridge"].is_open


def test_a_handle_not_where_it_is_expected_is_a_grasp_missed_and_nothing_moves(sim, monkeypatch):
    # The skill looks for the drawer's handle a third of the way up its front, where the front is bare: the gripper
    # closes on nothing, which the gripper's gap tells.
    monkeypatch.setattr(articulation, "DRAWER_HANDLE_HEIGHT", 0.3)
    skills = _at(sim, "emmoe-005", "kitchen_drawer")
    result = skills.run(Action.OPEN, "oracle", "kitchen_drawer")
    assert result.status is SkillStatus.EXECUTION_FAILED
    assert "grasp missed" in result.detail
    assert skills.driver.articulation_joint("kitchen_drawer") < 0.02
    assert not sim.state().entities["kitchen_drawer"].is_open


def test_what_lies_in_a_drawer_rides_out_with_its_tray(sim):
    # emmoe-021's bowl_2 lies in apartment_4's kitchen drawer. Pulled out by the arm, the tray carries it (it may lag a
    # little on the tray's floor): the world graph has it in the drawer, moved about as far as the tray. (The
    # simulator once stored it relative to the tray before the pull, and wrote it a second tray's length out.)
    skills = _at(sim, "emmoe-021", "kitchen_drawer")
    before = sim.state().entities["bowl_2"].position
    assert skills.run(Action.OPEN, "oracle", "kitchen_drawer").success
    slide = skills.driver.articulation_joint("kitchen_drawer")
    bowl = sim.state().entities["bowl_2"]
    assert (bowl.parent, bowl.relation) == ("kitchen_drawer", "in")
    moved = math.dist(before[:2], bowl.position[:2])
    assert abs(moved - slide) < 0.15, (moved, slide)

"""The physical Pick plans the arm's motion around furniture when the straight joint-space motion collides
(homiebot/skills/physical/motion.py), under physics, and says so when no motion is found within the budget; the
furniture behind an object on a low seat stays in the check the motions are planned with.

Scenes: EMMOE-100's emmoe-038 (the cracker box "red_box_2" on the TV stand in front of the TV: every straight
motion from the tuck to a pre-grasp over the box, and the one through the tuck, sweeps the arm through the TV's
box) and emmoe-056 (a cracker box on a sofa's seat, 15 cm in front of its back).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.skills.physical import PhysicalSkillSet, manipulation
from homiebot.skills.physical.manipulation import Obstacles
from homiebot.skills.physical.motion import PlannerSettings
from homiebot.tasks.suite import get_task
from homiebot.types import Action, EntityKind, EntityState, Pose2D, SkillStatus, WorldState


def _at_the_box(sim: MujocoSimulator, **arm: object) -> PhysicalSkillSet:
    task = get_task("emmoe-038")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, arm=dataclasses.replace(manipulation.sim_arm_setup(), **arm))
    assert skills.run(Action.GO_TO, "oracle", "red_box_2").success
    return skills


def test_the_arm_goes_around_the_furniture_the_straight_motion_sweeps_through(sim, monkeypatch):
    skills = _at_the_box(sim)
    plans = []
    real_plan = manipulation.plan_motion
    monkeypatch.setattr(manipulation, "plan_motion", lambda *a, **k: plans.append(real_plan(*a, **k)) or plans[-1])
    goals = []
    send = skills.driver.follow_joint_trajectory
    monkeypatch.setattr(skills.driver, "follow_joint_trajectory", lambda t: goals.append(t) or send(t))
    picked = skills.run(Action.PICK, "oracle", "red_box_2")
    assert picked.success, picked.detail
    assert sim.state().held == "red_box_2"
    found = [p for p in plans if p.found]
    assert found and found[0].samples > 0, "the straight motion collides: the planner found the way"
    # The planned motion went to the arm as one goal through its waypoints.
    waypoints = found[0].waypoints
    assert waypoints is not None
    assert any([p.positions for p in g.points] == [pytest.approx(w) for w in waypoints] for g in goals)


def test_no_motion_within_the_budget_is_an_unreachable_pose_that_says_so_and_is_not_searched_again(sim, monkeypatch):
    skills = _at_the_box(sim, planner=PlannerSettings(max_samples=1))
    # The base stays where Go to left it (a Pick that reaches nothing would move it closer first, and from 0.24 m
    # closer the straight motion is clear): this is about the planner's answer from here.
    skills.manipulation.world = None
    searches = []
    real_plan = manipulation.plan_motion
    monkeypatch.setattr(manipulation, "plan_motion", lambda *a, **k: searches.append(1) or real_plan(*a, **k))
    picked = skills.run(Action.PICK, "oracle", "red_box_2")
    assert picked.status is SkillStatus.EXECUTION_FAILED
    assert picked.detail.startswith("unreachable pose: no collision-free arm motion gets there to grasp red_box_2 "
                                    "from here (0.62 m from the base, 0.60 m high): "
                                    "no collision-free motion found within 1 samples"), picked.detail
    assert "ran out of samples" in picked.detail
    assert sim.state().held is None
    # The executor's next try, from the same state (the arm tucked again): the same answer, without the search.
    searched = len(searches)
    assert searched > 0
    again = skills.run(Action.PICK, "oracle", "red_box_2")
    assert len(searches) == searched
    assert again.detail.endswith(", in an earlier try from here") and again.detail.startswith(picked.detail)


def test_an_object_on_a_low_seat_leaves_the_space_above_the_seat_free_but_not_behind_it():
    # A sofa 0.8 m high whose box holds its back too; a box on the seat (0.45 m), the robot in front of it (-x).
    sofa = EntityState("sofa", "sofa", EntityKind.FURNITURE, (), (4.5, 2.5, 0.4), (4.05, 1.45, 0.0), (4.95, 3.55, 0.8))
    box = EntityState("red_box", "box", EntityKind.OBJECT, (), (4.5, 3.0, 0.55), (4.42, 2.93, 0.45), (4.58, 3.07, 0.66),
                      parent="sofa", relation="on")
    world = WorldState(Pose2D(3.7, 3.0, 0.0), 0.3, None, {"sofa": sofa, "red_box": box})
    obstacles = Obstacles.of(world, {"red_box"}, resting=box)
    # Points in the robot's frame (it stands at x 3.7 facing +x): above the seat in front of the box and over it...
    assert obstacles.hit(np.array([[0.6, 0.0, 0.7], [0.8, 0.0, 0.75]])) is None
    # ...but not past the box's far face, where the sofa's back stands, nor the seat itself.
    assert obstacles.hit(np.array([[1.1, 0.0, 0.7]])) == "sofa"
    assert obstacles.hit(np.array([[0.8, 0.0, 0.3]])) == "sofa"


def test_a_box_on_a_sofa_seat_is_carried_back_without_sweeping_it_through_the_sofa_back(sim):
    task = get_task("emmoe-056")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "red_box_2").success
    assert sim.state().entities["red_box_2"].parent == "sofa"
    picked = skills.run(Action.PICK, "oracle", "red_box_2")
    assert picked.success, picked.detail  # was: "the arm stopped while carrying red_box_2" (its bottom on the back)
    assert sim.state().held == "red_box_2"

"""The physical Pick plans the arm's motion around furniture when the straight joint-space motion collides
(homiebot/skills/physical/motion.py), under physics, and says so when no motion is found within the budget.

Scene: EMMOE-100's emmoe-038 (the cracker box "red_box_2" on a low table in front of the TV): every straight motion
from the tuck to a pre-grasp over the box, and the one through the tuck, sweeps the arm through the TV's box.
"""

from __future__ import annotations

import dataclasses

import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.skills.physical import PhysicalSkillSet, manipulation
from homiebot.skills.physical.motion import PlannerSettings
from homiebot.tasks.suite import get_task
from homiebot.types import Action, SkillStatus


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


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


def test_no_motion_within_the_budget_is_an_unreachable_pose_that_says_so(sim):
    skills = _at_the_box(sim, planner=PlannerSettings(max_samples=1))
    picked = skills.run(Action.PICK, "oracle", "red_box_2")
    assert picked.status is SkillStatus.EXECUTION_FAILED
    assert picked.detail.startswith("unreachable pose: no collision-free arm motion gets there to grasp red_box_2 "
                                    "from here (0.62 m from the base, 0.60 m high): "
                                    "no collision-free motion found within 1 samples"), picked.detail
    assert "ran out of samples" in picked.detail
    assert sim.state().held is None

"""The whole-body pull of Close through the arm (homiebot/skills/physical/articulation.py, "The whole-body pull"):
the fingers hold a door's free edge while the base and the arm move together in one trajectory under physics
(``PhysicalDriver.follow_whole_body_trajectory``), so that the base backs out of the door's way as it swings shut.

Scene: EMMOE-100's emmoe-020 (apartment_5: the fridge found open square by its wall, the oven 0.1 m beyond its free
edge). From the one place where the arm takes that edge, the door met the base after 0.08 rad
(docs/results/physical-articulation-2026-11-30.md).
"""

from __future__ import annotations

import math

from homiebot.sim.robot_driver import JointTrajectory, TrajectoryErrorCode, TrajectoryPoint
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.tasks.suite import get_task
from homiebot.types import Action


def test_a_whole_body_trajectory_moves_the_base_under_physics_and_the_simulator_keeps_it(sim):
    task = get_task("emmoe-020")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, articulation="physical")
    driver = skills.driver
    start = sim.state().robot
    arm = driver.joint_positions()
    names = driver.whole_body_joint_names
    assert names[:3] == ("base_x", "base_y", "base_yaw")
    # Through the arm's interface the base is refused (it is navigation's there).
    refused = driver.follow_joint_trajectory(JointTrajectory(("base_x",), (TrajectoryPoint((start.x + 0.1,), 1.0),)))
    assert refused.error_code is TrajectoryErrorCode.INVALID_JOINTS
    # 0.2 m along x and a quarter turn, the arm where it is; the goal's heading a full turn off (the short way round).
    goal = (start.x + 0.2, start.y, start.yaw + 0.25 + 2 * math.pi, *(arm[j] for j in names[3:]))
    result = driver.follow_whole_body_trajectory(JointTrajectory(names, (TrajectoryPoint(goal, 3.0),)))
    assert result.succeeded, result.error_string
    now = sim.state().robot
    assert math.hypot(now.x - start.x - 0.2, now.y - start.y) < 0.03
    assert abs(math.remainder(now.yaw - start.yaw - 0.25, 2 * math.pi)) < 0.03
    assert sim.base_pose() == now


def test_a_fridge_found_open_square_by_its_wall_is_closed_with_the_base_backing_out_of_the_door_s_way(sim):
    task = get_task("emmoe-020")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim, articulation="physical")
    assert skills.run(Action.GO_TO, "oracle", "fridge").success
    assert sim.state().entities["fridge"].is_open
    before = sim.state().robot
    closed = skills.run(Action.CLOSE, "oracle", "fridge")
    assert closed.success, closed.detail
    assert "with the gripper" in closed.detail
    # Physics left the door where the hand let it go: shut past half its range (the world graph's closed), by the
    # arm, not set.
    assert not sim.state().entities["fridge"].is_open
    assert skills.driver.articulation_joint("fridge") < 0.8
    assert skills.driver.held_leaf() is None
    after = sim.state().robot
    assert math.hypot(after.x - before.x, after.y - before.y) > 0.3  # the base moved with the hand

"""The physical arm: FollowJointTrajectory and GripperCommand on the MuJoCo robot under physics, inverse kinematics on
its URDF (mink), and Pick / Put planned from the world graph (``--skills physical``).

Scene: EMMOE-100's emmoe-084 (apartment_1, seed 4108): a short can on the kitchen counter, a kitchen drawer.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from homiebot.agent.build import build_episode
from homiebot.config.run import RunConfig
from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.mujoco.physical import PhysicalDriver
from homiebot.sim.mujoco.urdf import robot_urdf
from homiebot.sim.robot_driver import JointTrajectory, TrajectoryErrorCode, TrajectoryPoint
from homiebot.skills.physical import ArmKinematics, PhysicalSkillSet, sim_arm_setup
from homiebot.skills.physical.manipulation import tool_pose
from homiebot.tasks.suite import get_task
from homiebot.types import Action, EntityKind, SkillStatus

TASK = get_task("emmoe-084")
CHAIN = ("torso_lift", *robot_model.ARM_JOINTS)


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    simulator.reset(TASK.scene, seed=TASK.seed)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def kinematics() -> ArmKinematics:
    setup = sim_arm_setup()
    return ArmKinematics(robot_urdf(), setup.chain, setup.tip_link, setup.tcp_offset)


def trajectory(positions: dict[str, float], seconds: float = 2.0) -> JointTrajectory:
    return JointTrajectory(CHAIN, (TrajectoryPoint(tuple(positions[j] for j in CHAIN), seconds),))


TUCK = {"torso_lift": 0.3, **robot_model.TUCK_POSE}


# ---------------------------------------------------------------------------------------------- kinematics


def test_ik_reaches_a_pose_in_front_and_reports_one_out_of_reach(kinematics):
    setup = sim_arm_setup()
    seeds = [kinematics.vector({**dict.fromkeys(CHAIN, 0.0), **seed}) for seed in setup.reach_seeds]
    target = tool_pose((0.6, 0.1, 0.8), (0.0, 0.0, -1.0))
    solution = kinematics.solve(target, seeds)
    assert solution.converged
    reached = kinematics.forward(solution.positions)
    assert np.linalg.norm(reached[:3, 3] - target[:3, 3]) < 0.006
    assert np.allclose(reached[:3, 0], (0.0, 0.0, -1.0), atol=0.05)  # the tool points down
    assert all(lo - 1e-6 <= q <= hi + 1e-6 for q, lo, hi in zip(solution.positions, kinematics.lower, kinematics.upper, strict=True))
    far = kinematics.solve(tool_pose((1.8, 0.0, 0.8), (1.0, 0.0, 0.0)), seeds)
    assert not far.converged and far.position_error > 0.5


def test_ik_model_keeps_only_the_chain_and_the_tuck_stays_inside_the_footprint(kinematics):
    assert set(kinematics.joints) == set(CHAIN)
    points = kinematics.link_points(kinematics.vector(TUCK))
    assert np.hypot(points[:, 0], points[:, 1]).max() < robot_model.ROBOT_RADIUS + 0.04
    assert points[:, 2].min() >= 0.0
    with pytest.raises(ValueError, match="no joints"):
        ArmKinematics(robot_urdf(), ("torso_lift", "elbow_bend"), "gripper_link", (0.09, 0.0, 0.0))


# ---------------------------------------------------------------------------------------------- the driver


def test_trajectory_goals_are_checked_like_a_joint_trajectory_controller(sim):
    driver = PhysicalDriver(sim)
    wrong = JointTrajectory(("shoulder_pan", "base_x"), (TrajectoryPoint((0.0, 0.0), 1.0),))
    assert driver.follow_joint_trajectory(wrong).error_code is TrajectoryErrorCode.INVALID_JOINTS
    backwards = JointTrajectory(("shoulder_pan",), (TrajectoryPoint((0.1,), 1.0), TrajectoryPoint((0.2,), 0.5)))
    assert driver.follow_joint_trajectory(backwards).error_code is TrajectoryErrorCode.INVALID_GOAL
    short = JointTrajectory(("shoulder_pan", "elbow_flex"), (TrajectoryPoint((0.1,), 1.0),))
    assert driver.follow_joint_trajectory(short).error_code is TrajectoryErrorCode.INVALID_GOAL


def test_the_arm_follows_a_trajectory_under_physics_and_the_simulator_keeps_where_it_ended(sim):
    driver = PhysicalDriver(sim)
    clock = sim.sim_time
    result = driver.follow_joint_trajectory(trajectory(TUCK, 2.0))
    assert result.succeeded, result.error_string
    joints = sim.joint_positions()
    assert all(abs(joints[j] - TUCK[j]) < 0.03 for j in CHAIN)
    assert sim.sim_time - clock >= 2.0  # the trajectory's time is the simulator's
    sim.go_to("kitchen")  # a kinematic skill in between keeps the physical arm's pose
    assert all(abs(sim.joint_positions()[j] - TUCK[j]) < 0.03 for j in CHAIN)


def test_an_arm_swung_into_a_counter_is_stopped_by_it(sim):
    driver = PhysicalDriver(sim)
    assert driver.follow_joint_trajectory(trajectory(TUCK)).succeeded
    sim.navigate_to_pose(_facing_counter(sim, 0.45))
    # Arm straight out at the counter's height: the counter is in the way.
    straight = {**dict.fromkeys(CHAIN, 0.0), "torso_lift": 0.1}
    result = driver.follow_joint_trajectory(trajectory(straight, 2.0))
    # Stopped on the way or short of the goal, depending on where along the swing the arm meets the counter.
    assert result.error_code in (TrajectoryErrorCode.PATH_TOLERANCE_VIOLATED, TrajectoryErrorCode.GOAL_TOLERANCE_VIOLATED)
    assert "blocked: kitchen_counter" in result.error_string


def test_the_gripper_closes_in_the_air_and_stalls_on_an_object_it_then_holds(sim):
    skills = PhysicalSkillSet(sim)
    driver = skills.driver
    closed = driver.gripper_command(0.0, 0.0)
    assert closed.reached_goal and not closed.stalled and closed.position < 0.005
    assert driver.held() is None
    opened = driver.gripper_command(0.09, 0.0)
    assert opened.reached_goal and opened.position > 0.085
    assert skills.run(Action.GO_TO, "oracle", "short_can").success
    picked = skills.run(Action.PICK, "oracle", "short_can")
    assert picked.success, picked.detail
    state = sim.state()
    assert state.held == "short_can" and state.entities["short_can"].held
    assert driver.gap() > 0.06  # the fingers stopped on the can (8.5 cm across), not closed


def test_an_object_released_in_the_air_falls(sim):
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "short_can").success
    assert skills.run(Action.PICK, "oracle", "short_can").success
    carried = sim.state().entities["short_can"].position
    skills.driver.gripper_command(0.09, 0.0)  # open the hand with the arm tucked
    state = sim.state()
    assert state.held is None
    resting = state.entities["short_can"].position
    assert resting[2] < carried[2] - 0.3  # fell from the tuck (over 1 m up) to the floor or a surface below


def test_put_into_an_open_drawer_and_the_whole_task_under_physics():
    config = RunConfig.model_validate({"task": TASK.id, "skills": {"mode": "physical"}, "simulator": {"render": False}})
    episode = build_episode(config)
    try:
        trajectory_ = episode.run()
        assert episode.skills is not None
        assert isinstance(episode.skills(episode.simulator, 0), PhysicalSkillSet)
        final = episode.simulator.state()
    finally:
        episode.close()
    assert trajectory_.goal_satisfied, [(r.subtask_text, r.feedback.code.value) for r in trajectory_.rounds]
    subtasks = [r.subtask_text for r in trajectory_.rounds]
    assert "[Put, short_can, kitchen_drawer]" in subtasks
    can = final.entities["short_can"]
    assert (can.parent, can.relation) == ("kitchen_drawer", "in")


# ---------------------------------------------------------------------------------------------- failures


def test_pick_out_of_reach_says_so_without_moving_the_base(sim):
    skills = PhysicalSkillSet(sim)
    start = sim.state().robot
    result = skills.manipulation.pick(sim.state(), "short_can")  # straight from the start, metres away
    assert result.status is SkillStatus.EXECUTION_FAILED
    assert result.detail.startswith("unreachable pose")
    assert sim.state().robot == start and sim.state().held is None


def test_a_stale_world_graph_makes_the_grasp_miss(sim):
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "short_can").success
    world = sim.state()
    can = world.entities["short_can"]
    # The map says the can is 12 cm to the side of where it is: the fingers close on air.
    shift = np.array([-math.sin(world.robot.yaw), math.cos(world.robot.yaw), 0.0]) * 0.12
    moved = dataclasses.replace(
        can,
        position=tuple(np.add(can.position, shift)),
        bbox_min=tuple(np.add(can.bbox_min, shift)),
        bbox_max=tuple(np.add(can.bbox_max, shift)),
    )
    stale = dataclasses.replace(world, entities={**world.entities, "short_can": moved})
    result = skills.manipulation.pick(stale, "short_can")
    assert result.status is SkillStatus.EXECUTION_FAILED
    assert "grasp missed" in result.detail
    assert sim.state().held is None
    assert sim.state().entities["short_can"].parent == "kitchen_counter"


def test_physical_skills_refuse_a_simulator_without_physics():
    class NotMujoco:
        pass

    with pytest.raises(TypeError, match="embedded MuJoCo simulator"):
        PhysicalSkillSet(NotMujoco())  # type: ignore[arg-type]


def _facing_counter(sim, gap: float):
    """A pose in front of the kitchen counter, ``gap`` m between the base's edge and the counter, facing it."""
    from homiebot.types import Pose2D

    counter = sim.state().entities["kitchen_counter"]
    assert counter.kind is EntityKind.FURNITURE
    x = (counter.bbox_min[0] + counter.bbox_max[0]) / 2
    y = counter.bbox_min[1] - robot_model.ROBOT_RADIUS - gap
    return Pose2D(x, y, math.pi / 2)

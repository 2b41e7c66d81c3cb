"""A look as joint goals (homiebot/agent/looks.py ``look_motion``; MujocoSimulator ``move_look_joints`` and
``head_view``): what the ROS graph sends to the head and torso controllers takes the view the in-process look takes,
and puts the robot back as it was."""

from __future__ import annotations

import numpy as np
import pytest

from homiebot.agent.looks import HEAD_JOINTS, TORSO_JOINT, Look, look_motion, look_target
from homiebot.sim.mujoco import robot as robot_model
from homiebot.tasks.suite import get_task
from homiebot.types import Pose2D, Subtask


def test_a_look_over_a_wall_raises_the_torso_points_the_head_and_puts_both_back():
    base = Pose2D(1.0, 2.0, 0.5)
    joints = {TORSO_JOINT: 0.1, "head_pan": 0.2, "head_tilt": -0.1, "shoulder_pan": 1.0}
    point = (1.8, 2.4, 0.7)
    motion = look_motion(Look(point, True), base, joints)
    assert [controller for controller, _ in motion.goals()] == ["torso", "head", "head", "torso"]
    top = robot_model.TORSO_RANGE[1]
    assert motion.torso is not None and motion.torso.joint_names == (TORSO_JOINT,)
    assert motion.torso.points[-1].positions == (top,)
    assert motion.torso.duration == pytest.approx((top - 0.1) / robot_model.TORSO_SPEED)
    # The head is pointed from the raised torso, as MujocoSimulator.look_at points it.
    pan, tilt = robot_model.head_angles((base.x, base.y, base.yaw), top, point)
    assert motion.head.joint_names == HEAD_JOINTS and motion.head.points[-1].positions == pytest.approx((pan, tilt))
    assert motion.head.duration == pytest.approx(max(abs(pan - 0.2), abs(tilt + 0.1)) / robot_model.HEAD_SPEED)
    assert motion.head_back.points[-1].positions == (0.2, -0.1)
    assert motion.torso_back is not None and motion.torso_back.points[-1].positions == (0.1,)


def test_a_look_with_the_head_alone_sends_two_goals_from_the_torso_where_it_is():
    motion = look_motion(Look((2.0, 0.0, 1.0), False), Pose2D(0.0, 0.0, 0.0), {TORSO_JOINT: 0.3, "head_pan": 0.0,
                                                                               "head_tilt": 0.0})
    assert [controller for controller, _ in motion.goals()] == ["head", "head"]
    assert motion.head.points[-1].positions == pytest.approx(robot_model.head_angles((0.0, 0.0, 0.0), 0.3, (2.0, 0.0, 1.0)))


def test_joint_states_without_the_head_are_a_key_error():
    with pytest.raises(KeyError):
        look_motion(Look((1.0, 0.0, 1.0), False), Pose2D(0.0, 0.0, 0.0), {TORSO_JOINT: 0.0})


def test_the_goals_take_the_in_process_look_and_leave_the_robot_as_it_was(sim):
    """emmoe-049's sink: the bowl and the sponge behind the basin's wall. The joint goals, applied the way the sim
    bridge applies them, render the same head view as ``look_at``; the clock moves by each goal's time (sequential
    goals: torso, then head, and back)."""
    task = get_task("emmoe-049")
    sim.reset(task.scene, seed=task.seed)
    assert sim.go_to("sink").success
    state = sim.state()
    look = look_target(Subtask("Go to", "sink"), state)
    assert look is not None and look.raise_torso
    joints, clock = sim.joint_positions(), sim.sim_time
    expected = sim.look_at(look.point, look.raise_torso)
    assert expected is not None
    clock_after_look = sim.sim_time
    motion = look_motion(look, state.robot, joints)
    seen = None
    for _controller, trajectory in motion.goals():
        sim.move_look_joints(dict(zip(trajectory.joint_names, trajectory.points[-1].positions, strict=True)),
                             trajectory.duration)
        if trajectory is motion.head:
            seen = sim.head_view()
    assert seen is not None and list(seen.views) == [robot_model.HEAD_CAMERA]
    got, want = seen.views[robot_model.HEAD_CAMERA], expected.views[robot_model.HEAD_CAMERA]
    assert np.array_equal(got.segmentation, want.segmentation)
    assert np.allclose(got.camera_to_world, want.camera_to_world, atol=1e-9)
    assert sim.joint_positions() == pytest.approx(joints)
    durations = sum(t.duration for _, t in motion.goals())
    assert sim.sim_time - clock_after_look == pytest.approx(durations)
    # In one process the torso and the head move together (the longer of the two, there and back).
    assert clock_after_look - clock == pytest.approx(2 * max(motion.torso.duration, motion.head.duration))


def test_a_joint_no_look_moves_is_refused(sim):
    sim.reset("apartment_4", seed=0)
    with pytest.raises(KeyError):
        sim.move_look_joints({"shoulder_pan": 0.3})

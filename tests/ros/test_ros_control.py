"""ros2_control's FollowJointTrajectory and GripperCommand (control_msgs, the workspace's stand-in) to and from the
core's types (homiebot.ros.control): exact round trips through CDR, as on the wire, and the codes kept."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


def _wire(msg):
    from rclpy.serialization import deserialize_message, serialize_message

    return deserialize_message(serialize_message(msg), type(msg))


def test_a_trajectory_goal_round_trips_with_its_times():
    from homiebot.ros import control
    from homiebot.sim.robot_driver import JointTrajectory, TrajectoryPoint

    trajectory = JointTrajectory(
        ("torso_lift", "shoulder_pan"),
        (TrajectoryPoint((0.3, -0.25), 0.6), TrajectoryPoint((0.1, 1.5), 2.125), TrajectoryPoint((0.0, 0.0), 7.000000001)),
    )
    goal = _wire(control.trajectory_goal_msg(trajectory))
    assert list(goal.trajectory.joint_names) == ["torso_lift", "shoulder_pan"]
    assert (goal.trajectory.points[1].time_from_start.sec, goal.trajectory.points[1].time_from_start.nanosec) == (2, 125_000_000)
    # A zero header stamp: ros2_control starts such a trajectory on receipt.
    assert (goal.trajectory.header.stamp.sec, goal.trajectory.header.stamp.nanosec) == (0, 0)
    back = control.trajectory_from_goal(goal)
    assert back.joint_names == trajectory.joint_names
    for got, sent in zip(back.points, trajectory.points, strict=True):
        assert got.positions == sent.positions
        assert got.time_from_start == pytest.approx(sent.time_from_start, abs=1e-9)


def test_a_multi_dof_trajectory_is_refused():
    from trajectory_msgs.msg import MultiDOFJointTrajectory

    from homiebot.ros import control
    from homiebot.sim.robot_driver import JointTrajectory

    goal = control.trajectory_goal_msg(JointTrajectory(("shoulder_pan",), ()))
    goal.multi_dof_trajectory = MultiDOFJointTrajectory(joint_names=["base"])
    with pytest.raises(control.TrajectoryGoalError, match="multi-DOF"):
        control.trajectory_from_goal(goal)


@pytest.mark.parametrize("code", [0, -1, -2, -3, -4, -5])
def test_trajectory_results_keep_control_msgs_codes(code):
    from control_msgs.action import FollowJointTrajectory

    from homiebot.ros import control
    from homiebot.sim.robot_driver import TrajectoryErrorCode, TrajectoryResult

    result = TrajectoryResult(TrajectoryErrorCode(code), "" if code == 0 else "wrist_flex 0.31 rad off its path")
    msg = _wire(control.trajectory_result_msg(result))
    assert msg.error_code == getattr(FollowJointTrajectory.Result, TrajectoryErrorCode(code).name)
    assert control.trajectory_result_from_msg(msg) == result


def test_an_unknown_trajectory_code_is_an_invalid_goal_that_keeps_the_number():
    from control_msgs.action import FollowJointTrajectory

    from homiebot.ros import control
    from homiebot.sim.robot_driver import TrajectoryErrorCode

    core = control.trajectory_result_from_msg(FollowJointTrajectory.Result(error_code=-42, error_string="controller busy"))
    assert core.error_code is TrajectoryErrorCode.INVALID_GOAL and not core.succeeded
    assert core.error_string == "trajectory error -42: controller busy"


def test_trajectory_feedback_is_in_the_goal_order():
    from homiebot.ros import control, convert

    feedback = _wire(control.trajectory_feedback_msg(("elbow_flex", "torso_lift"), {"torso_lift": 0.3, "elbow_flex": 1.0},
                                                     {"elbow_flex": 0.75, "torso_lift": 0.3, "wrist_flex": 9.0}, 12.5, 2.0))
    assert list(feedback.joint_names) == ["elbow_flex", "torso_lift"]
    assert list(feedback.desired.positions) == [1.0, 0.3]
    assert list(feedback.actual.positions) == [0.75, 0.3]
    assert list(feedback.error.positions) == pytest.approx([0.25, 0.0])
    assert convert.time_seconds(feedback.header.stamp) == 12.5 and feedback.header.frame_id == "base_link"


def test_gripper_goal_and_result_round_trip():
    from homiebot.ros import control
    from homiebot.sim.robot_driver import GripperResult

    goal = _wire(control.gripper_goal_msg(0.09, 60.0))
    assert control.gripper_goal(goal) == (0.09, 60.0)
    for result in (GripperResult(0.031, 12.5, True, False), GripperResult(0.0, 0.0, False, True)):
        assert control.gripper_result_from_msg(_wire(control.gripper_result_msg(result))) == result
        feedback = _wire(control.gripper_feedback_msg(result))
        assert (feedback.position, feedback.stalled, feedback.reached_goal) == (result.position, result.stalled, result.reached_goal)

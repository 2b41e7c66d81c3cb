"""ros2_control's arm and gripper actions (control_msgs 5.8.0, Jazzy) to and from the core's types
(:mod:`homiebot.sim.robot_driver`): what the sim bridge serves in physical mode and what the physical skills'
ROS driver (:mod:`homiebot.ros.robot_driver`) sends.

* ``FollowJointTrajectory``: the goal's ``trajectory`` (trajectory_msgs/JointTrajectory) is the core's
  :class:`~homiebot.sim.robot_driver.JointTrajectory`; the multi-DOF trajectory and the tolerances are left empty
  (the controller's configured ones apply, as a JointTrajectoryController does with an empty list). A server here
  refuses a goal that carries a multi-DOF trajectory, which the arm has no joint for. The result's ``error_code``
  is :class:`~homiebot.sim.robot_driver.TrajectoryErrorCode`.
* ``GripperCommand``: the command's ``position`` is the gap the robot profile's ``gripper.position_unit`` names
  (here metres between the fingers) and ``max_effort`` newtons (0: the controller's limit); the result is
  :class:`~homiebot.sim.robot_driver.GripperResult` field for field.

The feedback of ``FollowJointTrajectory`` carries the joints' positions: ``desired`` where the trajectory wants
them, ``actual`` where they are, ``error`` the difference, in the goal's joint order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import GripperCommand as GripperCommandMsg
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from homiebot.ros.convert import BASE_FRAME, duration_msg, header, time_seconds
from homiebot.sim.robot_driver import (
    GripperResult,
    JointTrajectory,
    TrajectoryErrorCode,
    TrajectoryPoint,
    TrajectoryResult,
)

#: ros2_control's action names for a controller named ``arm_controller`` / ``gripper_controller`` (the
#: ``arm_trajectory`` and ``gripper`` roles of the sim robot profile, homiebot/config/robots/sim.yaml).
FOLLOW_JOINT_TRAJECTORY = "/arm_controller/follow_joint_trajectory"
GRIPPER_COMMAND = "/gripper_controller/gripper_cmd"


class TrajectoryGoalError(ValueError):
    """A FollowJointTrajectory goal the core cannot take: what it carries has no meaning for this arm."""


def trajectory_goal_msg(trajectory: JointTrajectory) -> FollowJointTrajectory.Goal:
    """A goal for ``trajectory``. The header stays zero: a zero stamp means "start on receipt" to ros2_control."""
    points = [
        JointTrajectoryPoint(positions=[float(v) for v in point.positions], time_from_start=duration_msg(point.time_from_start))
        for point in trajectory.points
    ]
    return FollowJointTrajectory.Goal(trajectory=JointTrajectoryMsg(joint_names=list(trajectory.joint_names), points=points))


def trajectory_from_goal(goal: FollowJointTrajectory.Goal) -> JointTrajectory:
    """The core's trajectory of a goal: joint names and each point's positions and time (velocities,
    accelerations and efforts are not followed: the position controller interpolates between points).

    Raises:
        TrajectoryGoalError: the goal carries a multi-DOF trajectory.
    """
    if goal.multi_dof_trajectory.joint_names or goal.multi_dof_trajectory.points:
        raise TrajectoryGoalError("multi-DOF trajectories are not served: the arm has no multi-DOF joint")
    return JointTrajectory(
        joint_names=tuple(goal.trajectory.joint_names),
        points=tuple(
            TrajectoryPoint(tuple(float(v) for v in point.positions), time_seconds(point.time_from_start))
            for point in goal.trajectory.points
        ),
    )


def trajectory_result_msg(result: TrajectoryResult) -> FollowJointTrajectory.Result:
    return FollowJointTrajectory.Result(error_code=int(result.error_code), error_string=result.error_string)


def trajectory_result_from_msg(msg: FollowJointTrajectory.Result) -> TrajectoryResult:
    """The core's result. A code outside control_msgs' constants (a controller's own) is kept in the message and
    read as ``INVALID_GOAL``: the goal was not carried out, for a reason the skill cannot tell apart."""
    value = int(msg.error_code)
    try:
        return TrajectoryResult(TrajectoryErrorCode(value), msg.error_string)
    except ValueError:
        detail = f"trajectory error {value}: {msg.error_string}" if msg.error_string else f"trajectory error {value}"
        return TrajectoryResult(TrajectoryErrorCode.INVALID_GOAL, detail)


def trajectory_feedback_msg(joint_names: Sequence[str], desired: Mapping[str, float], actual: Mapping[str, float],
                            seconds: float, time_from_start: float) -> FollowJointTrajectory.Feedback:
    """Feedback in the goal's joint order, stamped ``seconds`` (the server's clock)."""
    want = [float(desired[j]) for j in joint_names]
    have = [float(actual[j]) for j in joint_names]
    when = duration_msg(time_from_start)
    return FollowJointTrajectory.Feedback(
        header=header(seconds, BASE_FRAME),
        joint_names=list(joint_names),
        desired=JointTrajectoryPoint(positions=want, time_from_start=when),
        actual=JointTrajectoryPoint(positions=have, time_from_start=when),
        error=JointTrajectoryPoint(positions=[w - h for w, h in zip(want, have, strict=True)], time_from_start=when),
    )


def gripper_goal_msg(position: float, max_effort: float) -> GripperCommand.Goal:
    return GripperCommand.Goal(command=GripperCommandMsg(position=float(position), max_effort=float(max_effort)))


def gripper_goal(goal: GripperCommand.Goal) -> tuple[float, float]:
    """(position, max_effort) of a goal."""
    return float(goal.command.position), float(goal.command.max_effort)


def gripper_result_msg(result: GripperResult) -> GripperCommand.Result:
    return GripperCommand.Result(position=float(result.position), effort=float(result.effort), stalled=bool(result.stalled),
                                 reached_goal=bool(result.reached_goal))


def gripper_result_from_msg(msg: GripperCommand.Result) -> GripperResult:
    return GripperResult(position=float(msg.position), effort=float(msg.effort), stalled=bool(msg.stalled),
                         reached_goal=bool(msg.reached_goal))


def gripper_feedback_msg(result: GripperResult) -> GripperCommand.Feedback:
    """GripperCommand's feedback has the result's fields: where the fingers are now."""
    return GripperCommand.Feedback(position=float(result.position), effort=float(result.effort), stalled=bool(result.stalled),
                                   reached_goal=bool(result.reached_goal))

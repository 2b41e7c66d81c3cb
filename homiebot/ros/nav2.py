"""Nav2's ``NavigateToPose`` (nav2_msgs, Jazzy 1.3.13) to and from the core's base interface
(:mod:`homiebot.sim.robot_driver`): what the sim bridge serves on ``/navigate_to_pose`` and what a physical skill's
client reads back.

The goal is a ``geometry_msgs/PoseStamped`` in the ``map`` frame (an empty ``frame_id`` is taken as ``map``, as
Nav2's navigators default to their global frame); the BT XML in ``behavior_tree`` names a Nav2 behaviour tree and
has no meaning for the simulator, which always plans and follows as :meth:`MujocoSimulator.navigate_to_pose
<homiebot.sim.mujoco.backend.MujocoSimulator.navigate_to_pose>` does. The result carries Nav2's ``error_code``
(the failing sub-action's code, :class:`~homiebot.sim.robot_driver.NavErrorCode`) and ``error_msg``; whether the
goal succeeded is the action's status, not the result (Nav2's result alone cannot tell).
"""

from __future__ import annotations

import math

from geometry_msgs.msg import PoseStamped
from nav2_msgs.action import NavigateToPose

from homiebot.ros.convert import MAP_FRAME, duration_msg, header, pose2d_to_pose, pose_to_pose2d
from homiebot.sim.robot_driver import NavErrorCode, NavigateResult
from homiebot.types import Pose2D

#: Nav2's action name for an un-namespaced ``bt_navigator`` (the ``navigate`` role of the robot profiles).
NAVIGATE_TO_POSE = "/navigate_to_pose"


class GoalFrameError(ValueError):
    """A goal in a frame other than ``map``: the simulator's server has no tf tree to transform it with."""


def goal_msg(pose: Pose2D, seconds: float = 0.0) -> NavigateToPose.Goal:
    """A NavigateToPose goal to ``pose`` in the map frame, stamped ``seconds``; the navigator's default tree."""
    return NavigateToPose.Goal(pose=PoseStamped(header=header(seconds, MAP_FRAME), pose=pose2d_to_pose(pose)))


def goal_pose(goal: NavigateToPose.Goal) -> Pose2D:
    """The goal's planar pose in the map frame.

    Raises:
        GoalFrameError: the goal is stamped in another frame.
    """
    frame = goal.pose.header.frame_id.lstrip("/")
    if frame not in ("", MAP_FRAME):
        raise GoalFrameError(f"goal in frame {goal.pose.header.frame_id!r}: this server takes goals in {MAP_FRAME!r} only")
    return pose_to_pose2d(goal.pose.pose)


def feedback_msg(current: Pose2D, goal: Pose2D, navigation_time: float, seconds: float) -> NavigateToPose.Feedback:
    """Feedback: the base now (map frame, stamped ``seconds``), the straight-line distance left to the goal (the
    simulator does not keep the plan's remaining length: Nav2 reports the path's), and the time since the goal
    started, in the simulator's clock."""
    return NavigateToPose.Feedback(
        current_pose=PoseStamped(header=header(seconds, MAP_FRAME), pose=pose2d_to_pose(current)),
        navigation_time=duration_msg(navigation_time),
        distance_remaining=float(math.hypot(goal.x - current.x, goal.y - current.y)),
    )


def result_msg(result: NavigateResult) -> NavigateToPose.Result:
    return NavigateToPose.Result(error_code=int(result.error_code), error_msg=result.error_msg)


def result_from_msg(succeeded: bool, msg: NavigateToPose.Result, distance_travelled: float = 0.0) -> NavigateResult:
    """The core's result from the action's status (``succeeded``) and Nav2's result. A code outside
    :class:`NavErrorCode` (Nav2 has more: a planner plugin's, the navigator's own 9000s) becomes its family's
    unknown code, ``FOLLOW_UNKNOWN`` for 1xx and ``PLAN_UNKNOWN`` for 2xx, else ``NONE``, with the number kept in
    the message."""
    value = int(msg.error_code)
    message = msg.error_msg
    try:
        code = NavErrorCode(value)
    except ValueError:
        code = NavErrorCode.FOLLOW_UNKNOWN if 100 <= value < 200 else NavErrorCode.PLAN_UNKNOWN if 200 <= value < 300 else NavErrorCode.NONE
        message = f"nav2 error {value}: {message}" if message else f"nav2 error {value}"
    return NavigateResult(succeeded, code, message, distance_travelled)

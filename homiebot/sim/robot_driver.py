"""The standard interfaces a mobile manipulator exposes, as core types: what the physical skills call.

A real Jazzy robot with Nav2 and ros2_control serves ``navigate_to_pose`` (nav2_msgs/action/NavigateToPose), an
arm's ``follow_joint_trajectory`` (control_msgs/action/FollowJointTrajectory) and a gripper's ``gripper_cmd``
(control_msgs/action/GripperCommand), and publishes ``/joint_states`` and ``/odom`` (docs/robots.md). The
physical skills (:mod:`homiebot.skills.physical`) are written against :class:`RobotDriver`, which mirrors those
interfaces field for field where the skills need them, so that one implementation of the skills runs

* in-process on the MuJoCo robot (:class:`homiebot.sim.mujoco.physical.PhysicalDriver`), and
* through ROS 2 on whatever serves the standard actions (the sim bridge in physical mode, or a robot).

The result codes are the upstream ones (nav2_msgs 1.3.13 ``ComputePathToPose`` / ``FollowPath``; control_msgs
5.8.0 ``FollowJointTrajectory``), so the ROS layer converts without a table and a skill explains a failure the
same way whichever side produced it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from homiebot.types import Pose2D


class NavErrorCode(enum.IntEnum):
    """NavigateToPose's ``result.error_code`` (Jazzy): the smallest non-zero code of the BT's sub-actions.

    A subset: the ComputePathToPose codes 200-208 and the FollowPath codes 100-107 that a base can produce.
    ``NONE`` (0) with an aborted goal is possible upstream (a goal refused at start): the skill then reports an
    unexplained navigation failure.
    """

    NONE = 0
    FOLLOW_UNKNOWN = 100
    FAILED_TO_MAKE_PROGRESS = 105
    CONTROLLER_TIMED_OUT = 107
    PLAN_UNKNOWN = 200
    START_OCCUPIED = 205
    GOAL_OCCUPIED = 206
    PLAN_TIMEOUT = 207
    NO_VALID_PATH = 208


class TrajectoryErrorCode(enum.IntEnum):
    """FollowJointTrajectory's ``result.error_code`` (control_msgs 5.8.0)."""

    SUCCESSFUL = 0
    INVALID_GOAL = -1
    INVALID_JOINTS = -2
    OLD_HEADER_TIMESTAMP = -3
    PATH_TOLERANCE_VIOLATED = -4
    GOAL_TOLERANCE_VIOLATED = -5


@dataclass(frozen=True)
class NavigateResult:
    """The end of one NavigateToPose goal: ``succeeded`` is the action status (SUCCEEDED or not, as Nav2's
    result alone cannot tell), ``error_code`` only explains a failure."""

    succeeded: bool
    error_code: NavErrorCode = NavErrorCode.NONE
    error_msg: str = ""
    distance_travelled: float = 0.0


@dataclass(frozen=True)
class TrajectoryPoint:
    """trajectory_msgs/JointTrajectoryPoint: positions (rad or m, in the trajectory's joint order) reached at
    ``time_from_start`` seconds."""

    positions: tuple[float, ...]
    time_from_start: float


@dataclass(frozen=True)
class JointTrajectory:
    """trajectory_msgs/JointTrajectory without the header (execution starts on receipt)."""

    joint_names: tuple[str, ...]
    points: tuple[TrajectoryPoint, ...]

    @property
    def duration(self) -> float:
        return self.points[-1].time_from_start if self.points else 0.0


@dataclass(frozen=True)
class TrajectoryResult:
    """FollowJointTrajectory's result; ``error_string`` says which joint and by how much when a tolerance broke."""

    error_code: TrajectoryErrorCode
    error_string: str = ""

    @property
    def succeeded(self) -> bool:
        return self.error_code is TrajectoryErrorCode.SUCCESSFUL


@dataclass(frozen=True)
class GripperResult:
    """GripperCommand's result: the gap reached (m), the effort (N), whether the fingers stalled (on an object,
    typically) and whether the commanded gap was reached. ros2_control's GripperActionController aborts a
    stalled goal unless ``allow_stalling``: a skill reads a stall on closing as a possible grasp."""

    position: float
    effort: float
    stalled: bool
    reached_goal: bool


@dataclass(frozen=True)
class BaseMotion:
    """What one base velocity command did (geometry_msgs/Twist on ``/cmd_vel``, held for a control period): how far
    the base drove (m) and turned (rad), and what stopped it, when something did. A real base's collision monitor
    (Nav2's ``collision_monitor``, or a bumper) stops it before a contact; ``blocker`` names the thing the base would
    have touched, and the base stays where it stopped."""

    travelled: float
    turned: float
    blocker: str | None = None

    @property
    def blocked(self) -> bool:
        return self.blocker is not None


class SupportsBaseVelocity(Protocol):
    """A base driven by velocity commands (``/cmd_vel``, geometry_msgs/Twist's ``linear.x`` and ``angular.z`` for a
    planar base), as a learned Go to drives it (homiebot/skills/learned_goto.py), and reporting where it is."""

    def base_velocity(self, linear_x: float, angular_z: float, seconds: float,
                      tolerated: str | None = None) -> BaseMotion:
        """Hold the twist for ``seconds`` (clamped to the base's speed limits); ``tolerated``: a thing the base may
        keep touching (what it touched when the motion started, so that it can leave it)."""
        ...

    def base_contact(self) -> str | None:
        """What the base touches now, or None."""
        ...

    def base_pose(self) -> Pose2D: ...


class RobotDriver(Protocol):
    """The robot side of the physical skills (module docstring): one call is one goal, answered when it ends."""

    def navigate_to_pose(self, goal: Pose2D) -> NavigateResult: ...

    def follow_joint_trajectory(self, trajectory: JointTrajectory) -> TrajectoryResult: ...

    def gripper_command(self, position: float, max_effort: float) -> GripperResult: ...

    def joint_positions(self) -> dict[str, float]:
        """The latest ``/joint_states``, by joint name."""
        ...

    def base_pose(self) -> Pose2D:
        """The base in the map frame (``/odom`` composed with map->odom)."""
        ...

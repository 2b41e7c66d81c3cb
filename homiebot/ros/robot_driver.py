"""The physical skills' robot over ROS 2: :class:`ActionRobotDriver` implements
:class:`homiebot.sim.robot_driver.RobotDriver` with the standard interfaces a Jazzy robot serves, and nothing of the
simulator's:

* ``navigate_to_pose``: a goal to Nav2's ``NavigateToPose`` (:mod:`homiebot.ros.nav2`);
* ``follow_joint_trajectory``: a goal to the arm controller's ``FollowJointTrajectory``;
* ``gripper_command``: a goal to the gripper controller's ``GripperCommand`` (:mod:`homiebot.ros.control`);
* ``joint_positions``: the latest ``/joint_states`` (sensor_msgs/JointState);
* ``base_pose``: the latest ``/odom`` (nav_msgs/Odometry), taken as the map pose: the driver has no tf listener, so
  ``map -> odom`` is taken as the identity, which it is on the sim bridge. On a robot whose localisation corrects
  odometry, point ``odom`` at a topic that carries the map pose (e.g. amcl's ``/amcl_pose`` relayed as Odometry).

**Fresh state after a goal.** A goal's end changes the joints and the base, and a state message received before
the result (or during the goal) may describe the robot before it stopped. After every goal the driver therefore
reads ``/joint_states`` and ``/odom`` only from messages received after the result: a robot's
joint_state_broadcaster and odometry publish continuously, and the sim bridge in physical mode publishes both at
its ``state_rate_hz`` (docs/robots.md). No such message within ``DriverTimeouts.state_s`` is a
:class:`~homiebot.ros.calls.CallTimeout`: the robot has stopped publishing, a failure of the graph, not of the
skill.

**The distance travelled** of a NavigateToPose goal is summed along the ``/odom`` poses received while it ran and
the one after it (Nav2's result does not report it): a robot's odometry at its rate gives the path's length; the
sim bridge, which publishes between goals, gives the straight line from start to end.

Calls block the calling thread until the goal ends: call them from a thread that does not spin the node (the
executor nodes run the skills in a worker thread while the node's single-threaded executor spins, as
:mod:`homiebot.ros.calls` explains).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory, GripperCommand
from nav2_msgs.action import NavigateToPose
from nav_msgs.msg import Odometry
from rclpy.action import ActionClient
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from homiebot.ros import control, convert, nav2
from homiebot.ros.calls import LATCHED_QOS, SENSOR_QOS, CallTimeout, call_action_status
from homiebot.sim.robot_driver import (
    GripperResult,
    JointTrajectory,
    NavigateResult,
    TrajectoryErrorCode,
    TrajectoryResult,
)
from homiebot.types import Pose2D

T = TypeVar("T")


@dataclass(frozen=True)
class DriverInterfaces:
    """The names of the interfaces the driver uses (a robot profile's ``navigate``, ``arm_trajectory``,
    ``gripper``, ``joint_states`` and ``odom`` roles)."""

    navigate: str = nav2.NAVIGATE_TO_POSE
    arm_trajectory: str = control.FOLLOW_JOINT_TRAJECTORY
    gripper: str = control.GRIPPER_COMMAND
    joint_states: str = "/joint_states"
    odom: str = "/odom"


@dataclass(frozen=True)
class DriverTimeouts:
    """Deadlines (s): a goal from sending to its result (discovery included); a state message after a goal."""

    goal_s: float = 120.0
    state_s: float = 5.0


class LatestMessage(Generic[T]):
    """The latest message of a topic, with a count of the messages received, so that a reader can wait for one
    received after a given moment (see the module docstring)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._changed = threading.Condition()
        self._value: T | None = None
        self._count = 0
        self._needed = 1  # the count a reader waits for: none has come yet

    def put(self, value: T) -> None:
        with self._changed:
            self._value = value
            self._count += 1
            self._changed.notify_all()

    def stale(self) -> None:
        """What was received so far may describe the robot before a goal ended: wait for the next message."""
        with self._changed:
            self._needed = self._count + 1

    def get(self, timeout_s: float) -> T:
        with self._changed:
            if not self._changed.wait_for(lambda: self._count >= self._needed, timeout=max(timeout_s, 0.0)):
                raise CallTimeout(f"topic {self.topic}: no message within {timeout_s:.1f} s")
            assert self._value is not None
            return self._value


class ActionRobotDriver:
    """:class:`~homiebot.sim.robot_driver.RobotDriver` through a node's action clients and subscriptions (module
    docstring).

    Args:
        node: the node that owns the clients; its executor must spin while a call waits (in another thread).
        interfaces: the names (default: the sim profile's, which are ros2_control's and Nav2's defaults).
        timeouts: the deadlines.
        callback_group: the clients' and subscriptions' callback group.
    """

    def __init__(self, node: Node, interfaces: DriverInterfaces | None = None, timeouts: DriverTimeouts | None = None,
                 callback_group: CallbackGroup | None = None) -> None:
        self.interfaces = interfaces or DriverInterfaces()
        self.timeouts = timeouts or DriverTimeouts()
        names = self.interfaces
        self._navigate = ActionClient(node, NavigateToPose, names.navigate, callback_group=callback_group)
        self._trajectory = ActionClient(node, FollowJointTrajectory, names.arm_trajectory, callback_group=callback_group)
        self._gripper = ActionClient(node, GripperCommand, names.gripper, callback_group=callback_group)
        self._joints: LatestMessage[dict[str, float]] = LatestMessage(names.joint_states)
        self._odom: LatestMessage[Pose2D] = LatestMessage(names.odom)
        self._odom_track: list[Pose2D] | None = None  # the /odom poses of the NavigateToPose goal running
        self._subscriptions = [
            node.create_subscription(JointState, names.joint_states, self._on_joint_states, SENSOR_QOS,
                                     callback_group=callback_group),
            node.create_subscription(Odometry, names.odom, self._on_odom, SENSOR_QOS, callback_group=callback_group),
        ]

    # ------------------------------------------------------------------ RobotDriver

    def navigate_to_pose(self, goal: Pose2D) -> NavigateResult:
        start = self.base_pose()
        self._odom_track = [start]
        try:
            status, result = self._goal(self._navigate, nav2.goal_msg(goal))
            end = self.base_pose()
        finally:
            track, self._odom_track = self._odom_track, None
        track.append(end)
        travelled = sum(math.hypot(b.x - a.x, b.y - a.y) for a, b in zip(track, track[1:], strict=False))
        return nav2.result_from_msg(status == GoalStatus.STATUS_SUCCEEDED, result, travelled)

    def follow_joint_trajectory(self, trajectory: JointTrajectory) -> TrajectoryResult:
        status, result = self._goal(self._trajectory, control.trajectory_goal_msg(trajectory))
        core = control.trajectory_result_from_msg(result)
        if status != GoalStatus.STATUS_SUCCEEDED and core.succeeded:
            # ros2_control sets a code with every abort; a server that did not leaves the skill nothing to explain.
            return TrajectoryResult(TrajectoryErrorCode.INVALID_GOAL,
                                    f"the trajectory goal ended with status {status} and no error code")
        return core

    def gripper_command(self, position: float, max_effort: float) -> GripperResult:
        # A stalled gripper's goal is aborted unless the controller allows stalling; its result still says where
        # the fingers stopped, which is what a grasp is judged by.
        _status, result = self._goal(self._gripper, control.gripper_goal_msg(position, max_effort))
        return control.gripper_result_from_msg(result)

    def joint_positions(self) -> dict[str, float]:
        return dict(self._joints.get(self.timeouts.state_s))

    def base_pose(self) -> Pose2D:
        return self._odom.get(self.timeouts.state_s)

    # ------------------------------------------------------------------ helpers

    def _goal(self, client: ActionClient, goal: Any) -> tuple[int, Any]:
        try:
            return call_action_status(client, goal, self.timeouts.goal_s)
        finally:
            # Whatever the outcome, the robot may have moved: read the state from after the goal.
            self._joints.stale()
            self._odom.stale()

    def _on_joint_states(self, msg: JointState) -> None:
        self._joints.put({name: float(p) for name, p in zip(msg.name, msg.position, strict=False)})

    def _on_odom(self, msg: Odometry) -> None:
        pose = convert.pose_to_pose2d(msg.pose.pose)
        track = self._odom_track
        if track is not None:
            track.append(pose)
        self._odom.put(pose)

    def destroy(self) -> None:
        for client in (self._navigate, self._trajectory, self._gripper):
            client.destroy()


class LatchedText:
    """The text latched on a std_msgs/String topic (transient local: a robot's ``/robot_description``), subscribed
    from the start so that a reader in another thread waits for it without touching the node's entities."""

    def __init__(self, node: Node, topic: str, callback_group: CallbackGroup | None = None) -> None:
        self._latest: LatestMessage[str] = LatestMessage(topic)
        self._subscription = node.create_subscription(String, topic, self._on_text, LATCHED_QOS,
                                                      callback_group=callback_group)

    def _on_text(self, msg: String) -> None:
        self._latest.put(msg.data)

    def get(self, timeout_s: float) -> str:
        return self._latest.get(timeout_s)

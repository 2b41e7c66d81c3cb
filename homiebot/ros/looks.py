"""Looks on arrival through the ROS 2 graph (docs/ros.md, "Looks through the graph"): the robot points its head
camera through the standard interfaces a Fetch has, and the perception node fuses the head camera's image.

Where to look is the core's decision (:func:`homiebot.agent.looks.look_target`), taken by the one loop the planner
node runs; how the joints move for it is the core's too (:func:`homiebot.agent.looks.look_motion`). This module
only sends and reads messages:

* the goals go to ``/torso_controller/follow_joint_trajectory`` and ``/head_controller/follow_joint_trajectory``
  (control_msgs/FollowJointTrajectory, the names of Fetch's ROS driver, fetchrobotics/docs ``api_overview.rst``);
  Fetch also has ``head_controller/point_head`` (control_msgs/PointHead), which takes a point and solves the pan and
  tilt itself, but the workspace's control_msgs stand-in has no PointHead, so the pan and tilt are solved here;
* the current joints come from ``/joint_states`` (read only from a message received after the round's skill);
* the head camera's view is published by the robot (the sim bridge) when a head goal ends: per Fetch's names
  ``/head_camera/rgb/image_raw``, ``/head_camera/depth/image``, ``/head_camera/rgb/camera_info``, and the view with
  its pose and segmentation as a homie_msgs/MultiView of one view on :data:`HEAD_VIEWS`;
* the look hands perception the one frame it took, the head camera's view at the end of the pointing goal, on
  :data:`LOOK_VIEWS`; the perception node fuses it (objects only, as in one process) and answers with a
  ``/perception/world_graph`` stamped with the view's time. Not every head camera frame: the one after the head
  went back (raised torso, level head) is no part of the look, and fused it moved emmoe-049's bowl in the sink
  where the arm then ran into it;
* the furniture the round reached is the instance perception grounds the planner's word to
  (``/perception/resolve_target``, the service the executor grounded it with: the executor's result does not name
  it);
* the look is over when that graph has come (:class:`HeadLooker` waits for it): the next round's grounding then
  sees what the look saw, as in one process, where the fusion is a call.

The physical skills' look before they read the world (in one process ``homiebot.agent.loop._perceived_world``: after
the robot moved or time passed, with the hand empty, the objects of the four views from where it stands now are
fused first) is :class:`SkillLooker`, which the skill executors use: the robot takes the four views from where it
stands (the sim bridge's ``/sim/look_views``, homie_msgs/RenderViews) and publishes them on :data:`LOOK_VIEWS` for
the perception node to fuse objects-only (not on ``/homie/views``, which perception fuses whole: views from a
skill's every pose fused as furniture relabelled emmoe-011's counter in one process), and the executor waits for
perception's graph of them before ``/perception/perceive_world``. The perception node skips the fusion of views whose time
it has already fused (the round's own views, a head look's), as one process skips a look at the time last observed.
"""

from __future__ import annotations

import threading

from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from homie_msgs.msg import MultiView, WorldGraph
from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import RenderViews, ResolveTarget
from rclpy.action import ActionClient
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState

from homiebot.agent.looks import Look, LookMotion, look_motion
from homiebot.ros import control, convert
from homiebot.ros.calls import (
    LATCHED_QOS,
    SENSOR_QOS,
    VIEWS_QOS,
    CallFailed,
    CallTimeout,
    call_action_status,
    call_service,
)
from homiebot.ros.robot_driver import LatestMessage
from homiebot.sim.robot_driver import JointTrajectory, TrajectoryErrorCode
from homiebot.types import Pose2D

#: Fetch's head and torso controllers (fetchrobotics/docs api_overview.rst; homiebot/config/robots/fetch.yaml).
HEAD_TRAJECTORY = "/head_controller/follow_joint_trajectory"
TORSO_TRAJECTORY = "/torso_controller/follow_joint_trajectory"
#: The head camera's topics (Fetch's names) and the view perception fuses (module docstring).
HEAD_IMAGE = "/head_camera/rgb/image_raw"
HEAD_DEPTH = "/head_camera/depth/image"
HEAD_CAMERA_INFO = "/head_camera/rgb/camera_info"
HEAD_VIEWS = "/head_camera/views"
#: The four views a skill looks with before it reads the world, fused objects-only, and the robot's service that
#: takes them (module docstring).
LOOK_VIEWS = "/perception/look_views"
LOOK_VIEWS_SERVICE = "/sim/look_views"
#: The perception node's graph (stamped with the simulated time of what it last fused) and its grounding service.
WORLD_GRAPH = "/perception/world_graph"
RESOLVE_TARGET = "/perception/resolve_target"
#: Stamps are compared after a round trip through builtin_interfaces/Time (nanoseconds).
STAMP_TOLERANCE_S = 1e-6


class LookFailed(RuntimeError):
    """A look that could not be taken (a joint goal refused or aborted, no joint states): the round goes on."""


class NewestStamp:
    """The newest header stamp (s) seen on a topic, with a wait for one at least as new as a given time."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._newest = -1.0

    def put(self, seconds: float) -> None:
        with self._changed:
            self._newest = max(self._newest, seconds)
            self._changed.notify_all()

    def wait(self, seconds: float, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._newest >= seconds - STAMP_TOLERANCE_S, timeout=timeout_s)


class HeadLooker:
    """The look's messages for the planner node's backend (module docstring).

    Args:
        node: the node that owns the clients; its executor spins in another thread while :meth:`look` waits.
        goal_timeout_s: the deadline of each joint goal; ``fuse_timeout_s``: of perception's graph after the view.
    """

    def __init__(self, node: Node, goal_timeout_s: float = 30.0, fuse_timeout_s: float = 30.0,
                 callback_group: CallbackGroup | None = None) -> None:
        self._clients = {
            "head": ActionClient(node, FollowJointTrajectory, HEAD_TRAJECTORY, callback_group=callback_group),
            "torso": ActionClient(node, FollowJointTrajectory, TORSO_TRAJECTORY, callback_group=callback_group),
        }
        self.goal_timeout_s = goal_timeout_s
        self.fuse_timeout_s = fuse_timeout_s
        self._joints: LatestMessage[dict[str, float]] = LatestMessage("/joint_states")
        self._head_view: LatestMessage[MultiView] = LatestMessage(HEAD_VIEWS)
        self._looks = node.create_publisher(MultiView, LOOK_VIEWS, VIEWS_QOS)
        self._graph = NewestStamp()
        node.create_subscription(JointState, "/joint_states", self._on_joints, SENSOR_QOS, callback_group=callback_group)
        node.create_subscription(MultiView, HEAD_VIEWS, self._head_view.put, VIEWS_QOS, callback_group=callback_group)
        node.create_subscription(WorldGraph, WORLD_GRAPH, self._on_graph, LATCHED_QOS, callback_group=callback_group)
        self._resolve = node.create_client(ResolveTarget, RESOLVE_TARGET, callback_group=callback_group)

    def ground(self, name: str) -> str | None:
        """The simulator instance perception grounds ``name`` to (None: it knows none)."""
        response = call_service(self._resolve, ResolveTarget.Request(name=name), self.goal_timeout_s)
        return str(response.instance) if response.found else None

    def _on_joints(self, msg: JointState) -> None:
        self._joints.put({name: float(p) for name, p in zip(msg.name, msg.position, strict=False)})

    def _on_graph(self, msg: WorldGraph) -> None:
        self._graph.put(convert.time_seconds(msg.header.stamp))

    def robot_moved(self) -> None:
        """A skill ran: the joints known so far may be from before it (read the next ``/joint_states``)."""
        self._joints.stale()

    def look(self, look: Look, base: Pose2D, joints_timeout_s: float = 5.0) -> LookMotion:
        """Take ``look`` from ``base``: the joint goals of :func:`look_motion` in order, the head camera's view
        published at the end of the pointing goal, and the wait for perception's graph of it. Returns the motion
        sent.

        Raises:
            LookFailed: no joint states, or a goal refused or aborted (the joints are sent back first when the
                pointing had begun).
            CallTimeout: a goal or perception's graph did not come in time."""
        try:
            joints = self._joints.get(joints_timeout_s)
        except CallTimeout as err:
            raise LookFailed(f"no /joint_states after the skill: {err}") from None
        try:
            motion = look_motion(look, base, joints)
        except KeyError as err:
            raise LookFailed(f"/joint_states has no {err.args[0]}") from None
        goals = motion.goals()
        pointing = next(i for i, (controller, _) in enumerate(goals) if controller == "head")
        try:
            for index, (controller, trajectory) in enumerate(goals):
                if index == pointing:
                    self._head_view.stale()  # the view of this goal, not an earlier one
                self._send(controller, trajectory, f"{controller} goal {index + 1} of {len(goals)}")
                if index == pointing:
                    view = self._head_view.get(self.goal_timeout_s)
                    self._looks.publish(view)  # the look's frame, for perception to fuse
                    seen_at = convert.time_seconds(view.header.stamp)
                    if not self._graph.wait(seen_at, self.fuse_timeout_s):
                        raise CallTimeout(f"{WORLD_GRAPH}: no graph of the head view at t={seen_at:.3f} s "
                                          f"within {self.fuse_timeout_s:.0f} s")
        except (LookFailed, CallTimeout, CallFailed):
            self._put_back(motion)
            raise
        return motion

    def _send(self, controller: str, trajectory: JointTrajectory, what: str) -> None:
        status, result = call_action_status(self._clients[controller], control.trajectory_goal_msg(trajectory),
                                            self.goal_timeout_s)
        core = control.trajectory_result_from_msg(result)
        if status != GoalStatus.STATUS_SUCCEEDED or core.error_code is not TrajectoryErrorCode.SUCCESSFUL:
            raise LookFailed(f"{what}: status {status}, error {int(core.error_code)} {core.error_string}".rstrip())

    def _put_back(self, motion: LookMotion) -> None:
        """After a failed look, the head and the torso sent back where they were (best effort: a skill must not
        start with the torso up)."""
        for controller, trajectory in (("head", motion.head_back), ("torso", motion.torso_back)):
            if trajectory is None:
                continue
            try:
                self._send(controller, trajectory, f"{controller} back")
            except (LookFailed, CallTimeout, CallFailed):
                pass

    def destroy(self) -> None:
        for client in self._clients.values():
            client.destroy()



class SkillLooker:
    """The physical skills' look before a read of the world (module docstring), for a skill executor node.

    Args:
        node: the node; its executor spins in another thread while :meth:`look_if_due` waits.
        views_service: the service that takes the four views and publishes them on :data:`LOOK_VIEWS`
            (homie_msgs/RenderViews; the sim bridge's ``/sim/look_views``).
        timeout_s: the deadline of the views and of perception's graph of them.
    """

    def __init__(self, node: Node, views_service: str = LOOK_VIEWS_SERVICE, timeout_s: float = 30.0,
                 callback_group: CallbackGroup | None = None) -> None:
        self._render = node.create_client(RenderViews, views_service, callback_group=callback_group)
        self._graph = NewestStamp()
        node.create_subscription(WorldGraph, WORLD_GRAPH, self._on_graph, LATCHED_QOS, callback_group=callback_group)
        self.timeout_s = timeout_s
        self._looked: tuple[float, Pose2D] | None = None
        self.looks = 0

    def _on_graph(self, msg: WorldGraph) -> None:
        self._graph.put(convert.time_seconds(msg.header.stamp))

    def look_if_due(self, state: WorldStateMsg) -> bool:
        """Look when the hand is empty and the robot moved or time passed since the last look (``state``: the world
        now, as the state service gives it); True when it looked.

        Raises:
            CallTimeout: no views, or no graph of them, in time."""
        now = (convert.time_seconds(state.header.stamp), convert.pose_to_pose2d(state.robot_pose))
        if state.held or now == self._looked:
            return False
        request = RenderViews.Request(include_depth=False, include_segmentation=False)  # only the stamp is read
        views = call_service(self._render, request, self.timeout_s).views
        seen_at = convert.time_seconds(views.header.stamp)
        if not self._graph.wait(seen_at, self.timeout_s):
            raise CallTimeout(f"{WORLD_GRAPH}: no graph of the views at t={seen_at:.3f} s within {self.timeout_s:.0f} s")
        self._looked = now
        self.looks += 1
        return True

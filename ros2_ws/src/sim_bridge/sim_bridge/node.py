"""sim_bridge: binds a homiebot Simulator (embedded MuJoCo by default) to the ROS 2 graph.

Serves (names relative to the node's namespace):

* ``/sim/reset`` (homie_msgs/ResetEpisode), ``/sim/get_world_state`` (homie_msgs/GetWorldState),
  ``/sim/render_views`` (homie_msgs/RenderViews);
* ``/sim/navigate`` (homie_msgs/Navigate) and ``/sim/manipulate`` (homie_msgs/Manipulate): one skill
  attempt each, called by the navigation and manipulation executors;
* ``/navigate_to_pose`` (nav2_msgs/NavigateToPose, the standard interface a robot with Nav2 serves): the base
  driven to a map pose by the simulator's ``navigate_to_pose`` (:mod:`homiebot.ros.nav2`), for the physical
  skills. Feedback (the base's pose, the distance left, the time since the goal started) at the start and at the
  end; a failure aborts the goal with Nav2's ``error_code`` and an ``error_msg`` that says where and what. Served
  when the backend has ``navigate_to_pose`` and nav2_msgs is importable (the workspace's stand-in otherwise).

**Physical mode** (parameter ``skills: physical``; default ``oracle``; the embedded MuJoCo simulator only): the
bridge is the robot of ``--skills physical`` (docs/robots.md, "Physical skills through the ROS graph"). At every
reset it builds :class:`homiebot.skills.physical.PhysicalSkillSet`, whose
:class:`~homiebot.sim.mujoco.physical.PhysicalDriver` moves the arm and the gripper under physics, and serves the
standard interfaces from that driver:

* ``/arm_controller/follow_joint_trajectory`` (control_msgs/FollowJointTrajectory): the torso lift and the seven
  arm joints (the controller is Fetch's ``arm_with_torso_controller`` in joint set), feedback at the end with
  where the joints are, the result with ros2_control's ``error_code`` (a broken path or goal tolerance aborts);
* ``/gripper_controller/gripper_cmd`` (control_msgs/GripperCommand): the gap between the fingers in metres; a
  goal that reached its gap or stalled on an object succeeds (GripperActionController with ``allow_stalling``),
  one that did neither is aborted;
* in both, every door and drawer of the scene may be held by its handle and moves under physics as the arm pulls or
  pushes it, its joint then the simulator's state (``is_open`` in the world state): the Open and Close of a physical
  graph's executor are these goals (:mod:`homiebot.ros.physical_skills`), which name no door;
* ``/navigate_to_pose`` through the same driver;
* ``/joint_states`` and ``/odom`` at ``state_rate_hz`` (to subscribers), as a robot's joint_state_broadcaster and
  odometry publish them: the physical skills' ROS driver reads the joints and the base only from messages sent
  after a goal ended (:mod:`homiebot.ros.robot_driver`).

**Streamed targets** (physical mode; :mod:`homiebot.ros.policy_skill`): the arm controller's topic interface,
``/arm_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory, as ros2_control's JointTrajectoryController
takes it), for a closed-loop policy (the policy node, ``homie up --skill-model``). Each message names the torso, the arm
joints and optionally the two fingers (their sum is the gripper's commanded gap); each point is held from the previous
point's time to its own, and physics advances by exactly that much (the bridge's physics clock: between messages the
simulated time stands still, so a policy that thinks for 30 ms of wall time loses no simulated time). The targets go
to :meth:`~homiebot.sim.mujoco.physical.PhysicalDriver.setpoint_stream`, one stream from the first message until any
other goal, service call or reset (or an empty trajectory, which stops the arm where it is); while it is open the
published clock (``/clock`` after every message), ``/joint_states``, ``/odom`` and the stamps are the stream's (its
start plus the physics it ran; the base as physics has it: the arm's motion moves it a little). A point at time 0
opens the stream and runs no physics. At the end of every message the bridge publishes ``/joint_states``, ``/odom``
and, with ``skill_camera_size`` > 0 (``homie up --skill-model`` sets the policy's size), the policy's cameras
(homiebot/sim/mujoco/skill_cameras.py: ``head`` and ``wrist``) on ``/skill_camera/<camera>/image_raw`` and
``.../camera_info``, stamped with that moment, to their subscribers.

**Base velocity** (physical mode; :mod:`homiebot.ros.policy_goto`): ``/cmd_vel`` (geometry_msgs/Twist), the base
controller's velocity command, for a closed-loop Go to policy (the policy node of a navigation slot, ``homie up
--skill-model NoMaD=DIR``). Each message's ``linear.x`` and ``angular.z`` are held for one control period
(``cmd_vel_period_s``, 0.1 s: the policy's 10 Hz) of simulated time, and the clock stands still between messages, as
for streamed targets; the base moves as :meth:`~homiebot.sim.mujoco.physical.PhysicalDriver.base_velocity` moves it
(clamped to the base's speeds, stopped before a contact as a collision monitor stops a base: what the base touched at
the first message of a run it may leave). A real base controller holds a twist until the next one or its timeout. After
every message the bridge publishes ``/joint_states``, ``/odom``, ``/clock`` and, with ``skill_camera_size`` > 0, the
head camera on ``/skill_camera/head/image_raw`` (``camera_info`` beside it), stamped with the moment. A zero twist
(``linear.x`` and ``angular.z`` both 0) is a stop, not a period: the policy node sends one when its run ends, however it
ends, as Nav2's controller server does, and the bridge ends the run there (the next twist starts a new one) without
moving anything or advancing the clock (a base here is already at rest between messages), then publishes the state as
it is (stamped as the last frame; nothing while an arm stream is open). So the stop changes no outcome and the graph's
world, clock included, stays the in-process Go to's, which ends at rest without one. The price: a policy whose action
is exactly zero in the middle of a run gets no period for it here (docs/skills.md, "A Go to policy in the graph"). The goal photo
of an image-goal policy: a geometry_msgs/PoseStamped (``map`` frame) on ``/skill_camera/goal/pose`` is answered with
the head camera rendered with the base at that pose on ``/skill_camera/goal/image_raw`` (and ``camera_info``), stamped
with the request's stamp; then the head camera and ``/odom`` as they are now (the run's first frame). Nothing moves.

With ``motion_views`` (default off; ``homie up --images`` sets it) the bridge also renders the physical skills'
reaching views at the end of every arm and gripper goal (:mod:`homiebot.sim.mujoco.motion_views`: the head camera
and a third-person overview camera) and publishes them before the goal's result, as camera images with their
camera info (:mod:`homiebot.ros.motion_views`: ``/reach_camera/<camera>/image_raw``, ``.../camera_info``, and what
happened at each moment on ``/reach_camera/moments``), which the planner node keeps in the episode's record.

**Looks** (both skill settings, the embedded MuJoCo simulator with rendering; docs/ros.md, "Looks through the
graph"): the head and the torso as Fetch's controllers serve them, ``/head_controller/follow_joint_trajectory``
(``head_pan``, ``head_tilt``) and ``/torso_controller/follow_joint_trajectory`` (``torso_lift``), both
control_msgs/FollowJointTrajectory. A goal moves its joints to the last point the way the in-process look does
(written kinematically, the clock advanced by the goal's duration or the joints' velocity limits;
``MujocoSimulator.move_look_joints``); the world's version does not change. At the end of every head goal the head
camera's view is published before the result: ``/head_camera/rgb/image_raw``, ``/head_camera/depth/image`` and
``/head_camera/rgb/camera_info`` (to their subscribers; Fetch's names), and the view with its pose and segmentation
as a MultiView of one view on ``/head_camera/views``; the look hands the frame it took to the perception node
(``homiebot.ros.looks``). ``/sim/look_views``
(homie_msgs/RenderViews) takes the four views for the physical skills' look before they read the world: rendered as
``/sim/render_views`` renders them, and published whole on ``/perception/look_views`` (which the perception node
fuses objects-only), not on ``/homie/views``.

``/sim/navigate`` and ``/sim/manipulate`` stay, run by the same physical skill set (the executors of a physical
graph send only the household skills there, and Open and Close with their ``articulation: oracle``; the physical
skill set backs the base out of a door's sweep before such an Open, as in-process). The bridge's own parameter
``articulation`` (``oracle`` or ``physical``; empty, the default: the skill set's default) is the skill set's
setting for them; ``homie up sim --articulation`` sets it with the manipulation executor's.

Skills run through the skill layer, :class:`homiebot.skills.SkillSet`, built at every reset with the reset's
seed and the ``noise`` parameter's preset (``noiseless`` by default; ``emmoe_table4`` or its alias ``emmoe``:
EMMOE table 4's per-attempt failures): what ``homie run --noise`` builds in-process with the same seed, so a
task, seed and noise preset give the same attempts through the graph as in-process. The goal's ``model`` is
the one the skill layer runs (empty: ``oracle``); a model no skill serves is answered with
``EXECUTION_FAILED`` and the reason.

Publishes: ``/homie/views`` (homie_msgs/MultiView), per view ``/camera/<view>/image_raw`` (rgb8),
``/camera/<view>/depth/image_raw`` (32FC1), ``/camera/<view>/segmentation/image_raw`` (32SC1) and
``/camera/<view>/camera_info`` (and the same intrinsics on ``/camera/<view>/depth/camera_info``); ``/odom`` (nav_msgs/Odometry), ``/joint_states`` (sensor_msgs/JointState),
``/sim/path`` (nav_msgs/Path), ``/clock`` (rosgraph_msgs/Clock: the simulated time, from 0 at every reset, for
``use_sim_time``), ``/tf`` (tf2_msgs/TFMessage: ``map`` -> ``odom`` -> ``base_link``, and the robot's links from
their URDF parents) and latched ``/tf_static`` (the camera mounts, ``base_link`` -> ``<view>_camera_optical_frame``,
sent again only when a mount moves); latched ``/sim/world_state`` (homie_msgs/WorldState),
``/sim/scene_description`` (std_msgs/String: the scene spec as JSON, like ``robot_description``) and
``/robot_description`` (std_msgs/String: the robot's URDF, :func:`homiebot.sim.mujoco.urdf.robot_urdf`, sent once at
start-up).

PARTNR's human partner (``human`` parameter, default false; PARTNR paper, section 4: a robot and a humanoid
share the house): the simulator is built with the human's body (``MujocoSimulator(human=True)``) and the bridge
serves the human in its own namespace, ``/human``: ``/human/sim/get_world_state`` and ``/human/sim/render_views``
(the world as the human sees it: its pose and hand as the state's robot fields, its own four cameras),
``/human/sim/navigate`` and ``/human/sim/manipulate`` (the human's skill attempts, through its own skill layer
seeded as in-process: the reset's seed + 7919); it publishes ``/human/homie/views``, per view
``/human/camera/<view>/{image_raw, camera_info, depth/image_raw, depth/camera_info, segmentation/image_raw}`` (as the
robot's, in the human's own frames ``human/<view>_camera_optical_frame``), ``/human/odom``, ``/human/sim/world_state``
(every world version the human's side was asked for or acted on), on ``/tf`` ``odom`` -> ``human/base_link`` and
on ``/tf_static`` the human's camera mounts ``human/base_link`` -> ``human/<view>_camera_optical_frame`` beside
the robot's (one latched message holds both agents' mounts). ``/sim/begin_round``
(homie_msgs/GetWorldState: it answers the robot's state) starts a lock-step round as in-process (``begin_round``):
every agent's clock moves to the latest, so both start the round when the slower action of the last one ended.
The human's executors are the same executor nodes under other names, serving and calling the ``/human`` names
(launch/config/graph_pair.yaml). Both agents act on one world: every skill of either advances the one
``state_sequence``.

Robot model in rviz: there is no robot_state_publisher here (it is not among the ROS 2 wheels), so the bridge
plays its part. Its URDF is generated from the simulator's own MJCF (link names = the frames published here,
joint names = the names on ``/joint_states``); with every ``/tf`` it also sends each robot link's transform from
its URDF parent (torso, head, arm, gripper, fingers), computed by MuJoCo's forward kinematics (``xpos`` /
``xquat``) of the same robot at the joint positions the backend reports (``SupportsJointStates.joint_positions()``, as on
``/joint_states``). Those go in a TFMessage of their own ahead of ``map -> odom -> base_link`` (on a robot they
come from two publishers: the state publisher and localisation), fixed links (``gripper_link``) included,
so that ``/tf_static`` keeps the camera mounts alone.

The node only converts and calls the simulator; MuJoCo is not thread-safe, so every simulator call holds
one lock. Views are rendered when asked for (``/sim/render_views``) or at ``publish_rate_hz``; a render of an
unchanged state (same ``state_sequence``) is served from cache, so the reset's own render is not repeated.

Latency (the round trip of a graph round is what ``benchmarks/bench_ros.py`` measures): a skill's result
carries the world state after it, so neither the executor nor the planner has to ask for it again; once the
result has gone out, the bridge publishes that state on ``/sim/world_state`` and, with ``prerender`` (default
on), renders the new views into the cache while the result travels back to the planner, which asks for
them next.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from geometry_msgs.msg import PoseStamped
from homie_msgs.action import Manipulate, Navigate
from homie_msgs.msg import CameraView as CameraViewMsg
from homie_msgs.msg import MultiView
from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import GetWorldState, RenderViews, ResetEpisode
from nav_msgs.msg import Odometry, Path
from rclpy.action import ActionServer, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String

from homiebot.ros import convert
from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, SENSOR_QOS, VIEWS_QOS, announce_ready
from homiebot.ros.spin import spin_node
from homiebot.sim.base import (
    RobotModel,
    Simulator,
    SupportsAgents,
    SupportsClock,
    SupportsJointStates,
    SupportsNavigateToPose,
    SupportsPath,
    SupportsRobotModel,
    make_simulator,
)
from homiebot.sim.robot_driver import NavErrorCode, NavigateResult, RobotDriver, TrajectoryErrorCode, TrajectoryResult
from homiebot.skills import SkillSet, UnservedModelError, preset_name
from homiebot.types import VIEW_NAMES, Action, Observation, Pose2D, SkillResult, SkillStatus

T = TypeVar("T")

try:  # A ROS 2 install's nav2_msgs, else the workspace's stand-in (ros2_ws/compat/nav2_msgs, docs/robots.md).
    from homiebot.ros import nav2
except ImportError:  # pragma: no cover - depends on the machine
    nav2 = None  # type: ignore[assignment]

try:  # ros2_control's actions for physical mode: a ROS 2 install's control_msgs, else the workspace's stand-in.
    from homiebot.ros import control
except ImportError:  # pragma: no cover - depends on the machine
    control = None  # type: ignore[assignment]

try:  # The head and torso controllers of a look need control_msgs too.
    from homiebot.ros import looks
except ImportError:  # pragma: no cover - depends on the machine
    looks = None  # type: ignore[assignment]

try:  # A ROS 2 install's own tf2_msgs; with the PyPI wheels (no tf2_msgs) the workspace's stand-in,
    # ros2_ws/compat/tf2_msgs (same definitions and type hashes), which scripts/setup_ros.sh builds there.
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - depends on the machine
    TFMessage = None


#: How long after a skill's answer the bridge publishes its state and pre-renders (see SimBridge.__init__).
AFTER_SKILL_DELAY_S = 0.003
#: The skill settings (homiebot.config.SkillsMode): the simulator's kinematic skills, or physics behind the standard
#: interfaces (module docstring, "Physical mode").
ORACLE_SKILLS = "oracle"
PHYSICAL_SKILLS = "physical"
#: PARTNR's human partner: its agent id, name and namespace (module docstring).
HUMAN = 1
HUMAN_NAME = "human"
HUMAN_NAMESPACE = convert.ROLE_NAMESPACES[HUMAN_NAME]
#: The prefix of the human's frames: ``human/base_link``, ``human/<view>_camera_optical_frame``.
HUMAN_FRAME_PREFIX = f"{HUMAN_NAME}/"
#: The partner's skill-noise seed is the reset's seed + this x its id (as homiebot.agent.in_process seeds it).
PARTNER_SEED_STRIDE = 7919


def _requested_views(full: MultiView, request: RenderViews.Request) -> MultiView:
    """The views a RenderViews request asked for: RGB always, depth and segmentation when asked."""
    return MultiView(
        header=full.header,
        state_sequence=full.state_sequence,
        views=[
            CameraViewMsg(
                name=view.name,
                rgb=view.rgb,
                depth=view.depth if request.include_depth else Image(),
                segmentation=view.segmentation if request.include_segmentation else Image(),
                camera_info=view.camera_info,
                camera_pose=view.camera_pose,
            )
            for view in full.views
        ],
        instance_ids=full.instance_ids,
        instance_names=full.instance_names,
        robot_pose=full.robot_pose,
        held_object=full.held_object,
    )


def _in_frames_of(views: MultiView, prefix: str) -> None:
    """Put an agent's views in its own frames (``<prefix><view>_camera_optical_frame``): each agent has its own
    cameras, and two agents' images in one frame would put one of them in the wrong place in rviz and tf2."""
    for view in views.views:
        for stamped in (view.rgb, view.depth, view.segmentation, view.camera_info):
            if stamped.header.frame_id:
                stamped.header.frame_id = prefix + stamped.header.frame_id


class SimBridge(Node):
    def __init__(self, simulator: Simulator | None = None) -> None:
        super().__init__("sim_bridge")
        self.declare_parameter("simulator", "mujoco")
        self.declare_parameter("width", 256)
        self.declare_parameter("height", 256)
        self.declare_parameter("render", True)
        self.declare_parameter("scene", "")
        self.declare_parameter("seed", 0)
        self.declare_parameter("publish_rate_hz", 0.0)
        self.declare_parameter("publish_camera_topics", True)
        self.declare_parameter("prerender", True)
        self.declare_parameter("noise", "noiseless")
        self.declare_parameter("human", False)
        self.declare_parameter("skills", ORACLE_SKILLS)
        # How the physical skill set opens and closes doors and drawers (its /sim/manipulate goals; homie up
        # --articulation, docs/robots.md): "" its default (homiebot.skills.physical.skillset.ARTICULATION).
        self.declare_parameter("articulation", "")
        self.declare_parameter("state_rate_hz", 30.0)
        self.declare_parameter("motion_views", False)
        self.declare_parameter("skill_camera_size", 0)
        self.declare_parameter("cmd_vel_period_s", 0.1)

        if simulator is None:
            backend = self.get_parameter("simulator").value
            options = {"width": self.get_parameter("width").value, "height": self.get_parameter("height").value}
            if backend == "mujoco":
                options["render"] = self.get_parameter("render").value
                if self.get_parameter("human").value:
                    options["human"] = True
            simulator = make_simulator(backend, **options)
        self.sim = simulator
        self.physical = self._skills_mode(simulator)
        self.articulation = str(self.get_parameter("articulation").value) or None
        if self.articulation not in (None, ORACLE_SKILLS, PHYSICAL_SKILLS):
            raise ValueError(f"articulation {self.articulation!r}: use {ORACLE_SKILLS} or {PHYSICAL_SKILLS}")
        # The agents this bridge serves: 0 the robot, and the human (1) when the simulator has one.
        self.agents: tuple[int, ...] = simulator.agent_ids if isinstance(simulator, SupportsAgents) else (0,)
        self._agent_skills: dict[int, SkillSet] = {}  # the partner's skill layer, built at every reset
        self._agent_cached: dict[int, tuple[int, Observation]] = {}
        self.noise = preset_name(str(self.get_parameter("noise").value))  # an unknown preset stops the node here
        self.skills: SkillSet | None = None  # built at every reset (its noise is seeded with the reset's seed)
        self._lock = threading.Lock()
        self._sequence = 0
        self._loaded = False
        self._cached: tuple[int, Observation] | None = None
        self._published_state_sequence = -1
        # Streamed targets (module docstring): the open stream, its context manager and the clock at its start.
        self._stream = None
        self._stream_context = None
        self._stream_started = 0.0
        self._skill_cameras = None  # SkillCameras of the loaded model, made on the first streamed message
        self._skill_camera_size = int(self.get_parameter("skill_camera_size").value)
        self._skill_camera_pubs: dict[str, tuple] = {}
        # Base velocity (module docstring): what the base may keep touching in the current run of /cmd_vel messages
        # (None: nothing), and whether a run is open (any other call ends it, as it ends a stream).
        self._cmd_vel_period = float(self.get_parameter("cmd_vel_period_s").value)
        self._cmd_vel_open = False
        self._cmd_vel_tolerated: str | None = None

        # The node is spun by a single-threaded executor (see main); the lock guards the simulator against
        # a caller that spins it differently (tests that embed the node).
        sim_group = ReentrantCallbackGroup()
        self.create_service(ResetEpisode, "/sim/reset", self._on_reset, callback_group=sim_group)
        self.create_service(GetWorldState, "/sim/get_world_state", self._on_get_state, callback_group=sim_group)
        self.create_service(RenderViews, "/sim/render_views", self._on_render, callback_group=sim_group)
        self._navigate = ActionServer(
            self, Navigate, "/sim/navigate", self._on_navigate, goal_callback=self._accept, callback_group=sim_group
        )
        self._manipulate = ActionServer(
            self, Manipulate, "/sim/manipulate", self._on_manipulate, goal_callback=self._accept, callback_group=sim_group
        )
        # The standard base interface, when the backend drives its base to a pose (homiebot.ros.nav2).
        self._navigator: SupportsNavigateToPose | None = (
            simulator if isinstance(simulator, SupportsNavigateToPose) else None)
        self._navigate_to_pose = None
        if self._navigator is not None and nav2 is not None:
            self._navigate_to_pose = ActionServer(
                self, nav2.NavigateToPose, nav2.NAVIGATE_TO_POSE, self._on_navigate_to_pose, goal_callback=self._accept,
                callback_group=sim_group,
            )
        if self.physical:
            assert control is not None  # checked by _skills_mode
            self._trajectory_server = ActionServer(
                self, control.FollowJointTrajectory, control.FOLLOW_JOINT_TRAJECTORY, self._on_follow_joint_trajectory,
                goal_callback=self._accept, callback_group=sim_group,
            )
            self._gripper_server = ActionServer(
                self, control.GripperCommand, control.GRIPPER_COMMAND, self._on_gripper_command,
                goal_callback=self._accept, callback_group=sim_group,
            )
            self._serve_streamed_targets(sim_group)

        self._head_pubs = self._serve_looks(simulator, sim_group)

        self._views_pub = self.create_publisher(MultiView, "/homie/views", VIEWS_QOS)
        self._state_pub = self.create_publisher(WorldStateMsg, "/sim/world_state", EVENTS_QOS)
        self._scene_pub = self.create_publisher(String, "/sim/scene_description", LATCHED_QOS)
        # rclpy / rclcpp subscribe to /clock best effort and volatile, depth 1; a reliable, transient-local publisher
        # serves them too. /clock moves only at a reset and after a skill, so a late joiner (rviz, a recorder whose
        # discovery lagged behind the reset under load) would otherwise have no time, or miss the episode's 0: the
        # episode's clock is kept for it, as the episode events are.
        self._clock_pub = self.create_publisher(Clock, "/clock", EVENTS_QOS)
        self._odom_pub = self.create_publisher(Odometry, "/odom", SENSOR_QOS)
        self._joints_pub = self.create_publisher(JointState, "/joint_states", SENSOR_QOS)
        self._path_pub = self.create_publisher(Path, "/sim/path", LATCHED_QOS)
        self._tf_pub = self.create_publisher(TFMessage, "/tf", SENSOR_QOS) if TFMessage is not None else None
        self._tf_static_pub = self.create_publisher(TFMessage, "/tf_static", LATCHED_QOS) if TFMessage is not None else None
        # The camera mounts last latched on /tf_static, per agent frame prefix ("" the robot, "human/" the human):
        # (view names, view x 4 x 4 mounts, stamp).
        self._mounts_sent: dict[str, tuple[list[str], np.ndarray, float]] = {}
        # What the backend declares beyond the Simulator protocol (homiebot.sim.base: SupportsClock, SupportsPath,
        # SupportsJointStates, SupportsRobotModel), read once here; without one the bridge falls back (the views'
        # time, an empty path, the base joints only, no robot model).
        self._clock_source: SupportsClock | None = simulator if isinstance(simulator, SupportsClock) else None
        self._path_source: SupportsPath | None = simulator if isinstance(simulator, SupportsPath) else None
        self._joint_source: SupportsJointStates | None = simulator if isinstance(simulator, SupportsJointStates) else None
        # The robot's URDF, latched once; its kinematics give the robot links' /tf (see the module docstring).
        # Only the backend knows its robot, and a backend without it gets neither (a wrong model is worse than
        # none in rviz).
        self._kinematics: RobotModel | None = (
            simulator.robot_kinematics() if isinstance(simulator, SupportsRobotModel) else None)
        self._description_pub = self.create_publisher(String, "/robot_description", LATCHED_QOS)
        if self._kinematics is not None:
            self._description_pub.publish(String(data=self._kinematics.urdf()))
        else:
            self.get_logger().info(f"{type(simulator).__name__} describes no robot (SupportsRobotModel): no /robot_description")
        self._human_pubs: dict[str, object] = {}
        self._human_camera_pubs: dict[str, tuple] = {}
        self._published_human_sequence = -1
        if HUMAN in self.agents:
            self._serve_human(sim_group)
        self._camera_pubs = self._camera_publishers("")
        self._motion_pubs = self._motion_publishers()

        scene = self.get_parameter("scene").value
        if scene:
            self._reset(scene, int(self.get_parameter("seed").value))
        self._pending_sensors: tuple[MultiView, Observation] | None = None
        self._pending_state: WorldStateMsg | None = None
        self._prerender = bool(self.get_parameter("prerender").value) and bool(self.get_parameter("render").value)
        # Work done after an answer has gone out (publishing, pre-rendering): a guard condition's callback runs
        # in a later turn of the executor than the service or action callback that triggered it.
        self._publish_later = self.create_guard_condition(self._publish_pending, callback_group=sim_group)
        # After a skill: a one-shot timer rather than the guard condition. The skill's result is sent only when
        # the caller's get-result request has been taken, and the executor takes ready guard conditions before
        # an action server's requests, so a guard condition would render (12 ms) in front of the result. The
        # request is on its way while the skill runs; a few milliseconds later it has been answered.
        self._after_skill = self.create_timer(AFTER_SKILL_DELAY_S, self._on_after_skill, callback_group=sim_group)
        self._after_skill.cancel()
        rate = float(self.get_parameter("publish_rate_hz").value)
        if rate > 0:
            self.create_timer(1.0 / rate, self._on_timer, callback_group=sim_group)
        state_rate = float(self.get_parameter("state_rate_hz").value)
        if self.physical and state_rate > 0:
            self.create_timer(1.0 / state_rate, self._publish_robot_state, callback_group=sim_group)
        physical = ""
        if self.physical:  # the skill set's Open/Close setting, as it will be made at each reset
            from homiebot.skills.physical.skillset import ARTICULATION

            physical = f"; physical skills, Open and Close by articulation {self.articulation or ARTICULATION!r}"
        self.get_logger().info(f"simulator {self.sim.name!r} ready (tf2_msgs {'found' if TFMessage else 'absent: no /tf'})"
                               + physical)
        self._ready = announce_ready(self)  # services and publishers exist: the planner may start (calls.READY_TOPIC)

    def _camera_publishers(self, namespace: str) -> dict[str, tuple]:
        """Per view, the publishers of ``<namespace>/camera/<view>/...`` (none with ``publish_camera_topics``
        false): RGB, depth, segmentation, camera_info and depth/camera_info."""
        if not self.get_parameter("publish_camera_topics").value:
            return {}
        publishers = {}
        for view in VIEW_NAMES:
            base = f"{namespace}/camera/{view}"
            publishers[view] = (
                self.create_publisher(Image, f"{base}/image_raw", SENSOR_QOS),
                self.create_publisher(Image, f"{base}/depth/image_raw", SENSOR_QOS),
                self.create_publisher(Image, f"{base}/segmentation/image_raw", SENSOR_QOS),
                self.create_publisher(CameraInfo, f"{base}/camera_info", SENSOR_QOS),
                # The depth image is rendered by the same camera (aligned pixel for pixel), so it has the same
                # intrinsics; depth_image_proc and rviz look for them beside the depth image (image_transport's
                # CameraPublisher convention: camera_info is a sibling of the image topic).
                self.create_publisher(CameraInfo, f"{base}/depth/camera_info", SENSOR_QOS),
            )
        return publishers

    def _motion_publishers(self) -> dict[str, tuple] | None:
        """Physical mode with ``motion_views``: the reaching views' publishers (:mod:`homiebot.ros.motion_views`),
        the simulator's reaching views switched on; None otherwise (nothing is rendered for them then)."""
        if not self.physical or not self.get_parameter("motion_views").value:
            return None
        if self.sim.record_motion_views(True) is None:  # type: ignore[attr-defined]  # MujocoSimulator (physical)
            self.get_logger().warning("motion_views: the simulator does not render (render: false); no reaching views")
            return None
        from homiebot.ros import motion_views

        publishers = {camera: (self.create_publisher(Image, motion_views.image_topic(camera), motion_views.MOTION_QOS),
                               self.create_publisher(CameraInfo, motion_views.info_topic(camera),
                                                     motion_views.MOTION_QOS))
                      for camera in motion_views.CAMERAS}
        self._moments_pub = self.create_publisher(String, motion_views.MOMENTS_TOPIC, motion_views.MOTION_QOS)
        return publishers

    def _publish_motion(self) -> None:
        """The reaching views the last goal took (module docstring, "Physical mode"), before its result goes out."""
        if self._motion_pubs is None:
            return
        from homiebot.ros import motion_views

        with self._lock:
            frames = self.sim.motion_views.take()  # type: ignore[attr-defined]  # on: _motion_publishers
        motion_views.publish_frames(self._motion_pubs, self._moments_pub, self._tf_pub, frames)

    # ------------------------------------------------------------------------------------ skill settings

    def _skills_mode(self, simulator: Simulator) -> bool:
        """Whether the bridge runs in physical mode (the ``skills`` parameter); a setting it cannot serve stops
        the node here with the reason."""
        mode = str(self.get_parameter("skills").value)
        if mode not in (ORACLE_SKILLS, PHYSICAL_SKILLS):
            raise ValueError(f"skills {mode!r}: use {ORACLE_SKILLS} or {PHYSICAL_SKILLS}")
        if mode == ORACLE_SKILLS:
            return False
        from homiebot.sim.mujoco.backend import MujocoSimulator

        if not isinstance(simulator, MujocoSimulator):
            raise ValueError(f"skills {PHYSICAL_SKILLS} needs the embedded MuJoCo simulator, not {type(simulator).__name__}")
        if control is None or nav2 is None:
            raise ValueError(f"skills {PHYSICAL_SKILLS} needs control_msgs and nav2_msgs (scripts/setup_ros.sh builds them)")
        return True

    def _skill_set(self, seed: int) -> SkillSet:
        """This episode's skill layer (called holding the lock, after the reset): in physical mode the physical
        skill set, which takes the arm from the oracle's snaps for the episode (``use_physical_arm``)."""
        if not self.physical:
            return SkillSet(self.sim, noise=self.noise, seed=seed)
        from homiebot.skills.physical import PhysicalSkillSet

        skills = PhysicalSkillSet(self.sim, noise=self.noise, seed=seed, articulation=self.articulation)
        self.sim.use_physical_arm()  # type: ignore[attr-defined]  # MujocoSimulator (checked by _skills_mode)
        return skills

    def _driver(self) -> RobotDriver:
        """The episode's physical driver (goals are accepted only once a scene is loaded)."""
        driver = getattr(self.skills, "driver", None)
        assert driver is not None, "physical goals are served only in physical mode, after a reset"
        return driver

    def _any_handle(self, driver: RobotDriver, goal: Callable[[], T]) -> T:
        """Run an arm or gripper goal of the standard interfaces with every door and drawer of the scene holdable
        (module docstring, "Physical mode"; :meth:`PhysicalDriver.every_handle_holdable`): through the graph the
        skill's client says nothing of the door, so the robot's side cannot be told which one moves."""
        from homiebot.sim.mujoco.physical import PhysicalDriver

        if not isinstance(driver, PhysicalDriver):
            return goal()
        with driver.every_handle_holdable():
            return goal()

    # ------------------------------------------------------------------------------------ simulator calls

    def _reset(self, scene: str, seed: int) -> tuple[WorldStateMsg, str]:
        """Load ``scene``; publish its description, first state and clock; return the state and the description."""
        with self._lock:
            self._close_stream()
            observation = self.sim.reset(scene, seed=seed)
            if self._motion_pubs is not None:  # the reaching views are on (_motion_publishers)
                self.sim.motion_views.take()  # type: ignore[attr-defined]  # nothing of the last episode
            # As run_episode's skills factory: SkillSet(sim, noise=preset, seed=scene_seed), or PhysicalSkillSet.
            self.skills = self._skill_set(seed)
            # The partner's own noise stream, as homiebot.agent.in_process seeds it.
            self._agent_skills = {a: SkillSet(self.sim.agent(a), noise=self.noise, seed=seed + PARTNER_SEED_STRIDE * a)
                                  for a in self.agents if a != 0}
            self._agent_cached = {}
            self._sequence += 1
            self._loaded = True
            self._cached = (self._sequence, observation)
            spec_json = self.sim.scene_spec().model_dump_json()
        self._scene_pub.publish(String(data=spec_json))
        # Every state the views can show is published (perception fuses views with the state of their sequence).
        state = self._state_msg(*self._state())
        self._publish_state(state)
        self._publish_clock()
        return state, spec_json

    def _state(self):
        with self._lock:
            self._close_stream()
            return self._sequence, self.sim.state()

    def _observe(self) -> tuple[int, Observation]:
        with self._lock:
            self._close_stream()
            if self._cached is None or self._cached[0] != self._sequence:
                self._cached = (self._sequence, self.sim.observe())
            return self._cached

    def _skill(self, reset_arm_first: bool, call, sim: Simulator | None = None) -> SkillResult:
        with self._lock:
            self._close_stream()
            if reset_arm_first:
                (sim or self.sim).reset_arm()
            try:
                return call()
            finally:
                self._sequence += 1

    def _attempt(self, action: Action, model: str, target: str, place: str | None = None, agent: int = 0) -> SkillResult:
        """One attempt through ``agent``'s skill layer (called holding the lock, from :meth:`_skill`)."""
        skills = self.skills if agent == 0 else self._agent_skills.get(agent)
        assert skills is not None  # goals are accepted only once a scene is loaded
        try:
            return skills.run(action, model.strip() or "oracle", target, place)
        except UnservedModelError as err:
            return SkillResult(SkillStatus.EXECUTION_FAILED, str(err))

    # ------------------------------------------------------------------------------------ services

    def _state_msg(self, sequence: int, state) -> WorldStateMsg:
        msg = convert.world_state_to_msg(state, self._sim_time())
        msg.state_sequence = sequence
        return msg

    def _sim_time(self) -> float:
        """The simulator's clock now (a backend with :class:`SupportsClock`), else that of the last views."""
        if self._stream is not None:  # the physics clock of the open stream (module docstring, "Streamed targets")
            return self._stream_started + float(self._stream.elapsed)
        if self._clock_source is not None:
            return float(self._clock_source.sim_time)
        cached = self._cached
        return cached[1].sim_time if cached is not None else 0.0

    def _publish_clock(self) -> None:
        """/clock: the simulated time, so that rviz and tf2 run on it (``use_sim_time``). It starts again at 0 at
        every reset; tf2 buffers and rviz treat that as a jump back in time and clear themselves."""
        self._clock_pub.publish(Clock(clock=convert.time_msg(self._sim_time())))

    def _publish_state(self, msg: WorldStateMsg) -> None:
        if msg.state_sequence != self._published_state_sequence:
            self._published_state_sequence = msg.state_sequence
            self._state_pub.publish(msg)

    def _on_reset(self, request: ResetEpisode.Request, response: ResetEpisode.Response) -> ResetEpisode.Response:
        try:
            response.state, response.scene_description = self._reset(request.scene, int(request.seed))
        except Exception as err:  # an unknown scene or a broken spec: answer, do not crash the bridge
            self.get_logger().error(f"reset of scene {request.scene!r} failed: {err}")
            response.success = False
            response.message = str(err)
            return response
        response.success = True
        return response

    def _on_get_state(self, request: GetWorldState.Request, response: GetWorldState.Response) -> GetWorldState.Response:
        if not self._loaded:
            self.get_logger().warning("world state asked before any scene was loaded")
            return response
        sequence, state = self._state()
        response.state = self._state_msg(sequence, state)
        self._publish_state(response.state)
        return response

    def _on_render(self, request: RenderViews.Request, response: RenderViews.Response) -> RenderViews.Response:
        if not self._loaded:
            self.get_logger().warning("views asked before any scene was loaded")
            return response
        sequence, observation = self._observe()
        full = convert.observation_to_msg(observation)
        full.state_sequence = sequence
        response.views = _requested_views(full, request)
        # Publish the full views (depth, segmentation, per-camera topics) after the answer has gone out: the
        # caller is waiting for the answer, the subscribers (perception, rviz, a recorder) are not.
        self._pending_sensors = (full, observation)
        self._publish_later.trigger()
        return response

    def _on_after_skill(self) -> None:
        self._after_skill.cancel()
        state, self._pending_state = self._pending_state, None
        if state is not None:
            self._publish_state(state)
            if self._prerender and state.state_sequence == self._sequence:
                self._observe()  # the views of the new state, cached for the planner's next /sim/render_views

    def _publish_pending(self) -> None:
        pending, self._pending_sensors = self._pending_sensors, None
        if pending is not None:
            self._publish_sensors(*pending)

    def _on_timer(self) -> None:
        if not self._loaded:
            return
        sequence, observation = self._observe()
        full = convert.observation_to_msg(observation)
        full.state_sequence = sequence
        self._publish_sensors(full, observation)
        if HUMAN in self.agents:
            self._publish_human_sensors(*self._human_views())

    def _publish_sensors(self, views: MultiView, observation: Observation) -> None:
        """MultiView always; the per-camera topics, odometry, joints, path and /tf only when someone listens;
        /tf_static (latched) when the camera mounts are new."""
        self._views_pub.publish(views)
        seconds = observation.sim_time
        self._publish_cameras(self._camera_pubs, views)
        base_pose = convert.pose2d_to_pose(observation.robot_pose)
        if self._odom_pub.get_subscription_count() > 0:
            odom = Odometry(header=convert.header(seconds, convert.ODOM_FRAME), child_frame_id=convert.BASE_FRAME)
            odom.pose.pose = base_pose
            self._odom_pub.publish(odom)
        tf_listened = self._tf_pub is not None and self._tf_pub.get_subscription_count() > 0
        reported = self._reported_joints() if tf_listened or self._joints_pub.get_subscription_count() > 0 else None
        if self._joints_pub.get_subscription_count() > 0:
            self._joints_pub.publish(self._joint_state(observation.robot_pose, reported, seconds))
        if self._path_pub.get_subscription_count() > 0:
            self._path_pub.publish(self._path(seconds))
        if self._tf_pub is not None:
            self._publish_transforms(views, base_pose, reported, seconds)

    @staticmethod
    def _publish_cameras(publishers: dict[str, tuple], views: MultiView) -> None:
        """Each view's images and camera info on its own topics, to those that have a subscriber."""
        for view_msg in views.views:
            pubs = publishers.get(view_msg.name)
            if pubs is None:
                continue
            messages = (view_msg.rgb, view_msg.depth, view_msg.segmentation, view_msg.camera_info, view_msg.camera_info)
            for publisher, message in zip(pubs, messages, strict=False):
                if publisher.get_subscription_count() > 0:
                    publisher.publish(message)

    def _reported_joints(self) -> dict[str, float] | None:
        """The robot's joints above the base when the backend reports them (:class:`SupportsJointStates`; the
        Simulator protocol does not require it), else None. The MuJoCo backend reports torso lift, head pan/tilt,
        the seven arm joints and the two fingers."""
        if self._joint_source is None:
            return None
        with self._lock:
            return dict(self._joint_source.joint_positions())

    @staticmethod
    def _joint_state(pose: Pose2D, reported: dict[str, float] | None, seconds: float) -> JointState:
        """The base as three planar joints, plus the rest of the robot when the backend reports its joints."""
        positions = {"base_x": pose.x, "base_y": pose.y, "base_yaw": pose.yaw}
        positions.update(reported or {})
        return JointState(header=convert.header(seconds, convert.BASE_FRAME), name=list(positions), position=[float(v) for v in positions.values()])

    def _path(self, seconds: float) -> Path:
        points: list[tuple[float, float]] = []
        if self._path_source is not None:  # SupportsPath
            with self._lock:
                points = list(self._path_source.travelled_path)
        path = Path(header=convert.header(seconds))
        for x, y in points:
            pose = PoseStamped(header=path.header)
            pose.pose.position.x, pose.pose.position.y = float(x), float(y)
            pose.pose.orientation.w = 1.0
            path.poses.append(pose)
        return path

    def _publish_transforms(self, views: MultiView, base_pose, reported: dict[str, float] | None, seconds: float) -> None:
        """``/tf``: the robot's links from their URDF parents at the reported joint positions (when the backend
        reports them), then ``map`` -> ``odom`` (identity: the simulator's odometry does not drift) ->
        ``base_link``, when someone listens. ``/tf_static``: ``base_link`` -> each view's optical frame, latched,
        sent when the mounts differ from the last ones sent (the first time, and whenever a backend's cameras
        move on the base)."""
        if self._tf_pub.get_subscription_count() > 0:
            if reported is not None and self._kinematics is not None:
                # A message of its own (on a robot: the state publisher's, beside localisation's base chain).
                self._tf_pub.publish(TFMessage(transforms=[
                    convert.transform_stamped(convert.matrix_to_pose(transform), parent, child, seconds)
                    for parent, child, transform in self._kinematics.link_transforms(reported)
                ]))
            identity = convert.matrix_to_pose(np.eye(4))
            self._tf_pub.publish(TFMessage(transforms=[
                convert.transform_stamped(identity, convert.MAP_FRAME, convert.ODOM_FRAME, seconds),
                convert.transform_stamped(base_pose, convert.ODOM_FRAME, convert.BASE_FRAME, seconds),
            ]))
        self._latch_mounts("", views, base_pose, seconds)

    def _latch_mounts(self, prefix: str, views: MultiView, base_pose, seconds: float) -> None:
        """``/tf_static``: ``<prefix>base_link`` -> ``<prefix><view>_camera_optical_frame`` for one agent's views,
        when they differ from the ones last sent. The topic keeps one message (latched, depth 1), so the message
        holds every agent's mounts, as tf2's StaticTransformBroadcaster re-sends every static transform it has."""
        if self._tf_static_pub is None:
            return
        names, mounts = self._mounts(views, base_pose)
        sent = self._mounts_sent.get(prefix)
        if not names or (sent is not None and sent[1].shape == mounts.shape and np.allclose(sent[1], mounts, atol=1e-6)):
            return
        self._mounts_sent[prefix] = (names, mounts, seconds)
        self._tf_static_pub.publish(TFMessage(transforms=[
            convert.transform_stamped(convert.matrix_to_pose(mount), f"{agent}{convert.BASE_FRAME}",
                                      f"{agent}{convert.optical_frame(name)}", stamp)
            for agent, (agent_names, agent_mounts, stamp) in self._mounts_sent.items()
            for name, mount in zip(agent_names, agent_mounts, strict=False)
        ]))

    @staticmethod
    def _mounts(views: MultiView, base_pose) -> tuple[list[str], np.ndarray]:
        """Each view's optical frame in ``base_link`` (its camera pose in ``map`` seen from the base)."""
        base_inverse = np.linalg.inv(convert.pose_to_matrix(base_pose))
        names = [view.name for view in views.views]
        return names, np.array([base_inverse @ convert.pose_to_matrix(view.camera_pose) for view in views.views])

    # ------------------------------------------------------------------------------------ skill actions

    def _accept(self, goal) -> GoalResponse:
        return GoalResponse.ACCEPT if self._loaded else GoalResponse.REJECT

    def _on_navigate(self, goal_handle, agent: int = 0):
        goal = goal_handle.request
        sim = self._agent_sim(agent)
        result = self._skill(goal.reset_arm_first,
                             lambda: self._attempt(Action.GO_TO, goal.model, goal.target, agent=agent), sim)
        self._publish_motion()
        state = self._state_after_skill(agent)
        goal_handle.publish_feedback(Navigate.Feedback(pose=state.robot_pose))
        goal_handle.succeed()
        return Navigate.Result(result=convert.skill_result_to_msg(result), state=state)

    def _on_navigate_to_pose(self, goal_handle):
        """Nav2's NavigateToPose on the simulator (module docstring): one goal, answered when the base stops."""
        assert nav2 is not None and self._navigator is not None  # the server exists only with both
        # In physical mode the episode's driver, which moves the base the same way (the simulator's planner and
        # follower) and is the one the arm's and the gripper's goals go to.
        navigator = self._driver() if self.physical else self._navigator
        try:
            goal = nav2.goal_pose(goal_handle.request)
        except nav2.GoalFrameError as err:
            goal_handle.abort()
            return nav2.result_msg(NavigateResult(False, NavErrorCode.NONE, str(err)))
        with self._lock:
            start, started = navigator.base_pose(), self._sim_time()
        goal_handle.publish_feedback(nav2.feedback_msg(start, goal, 0.0, started))
        result = self._skill(False, lambda: navigator.navigate_to_pose(goal))
        with self._lock:
            end, now = navigator.base_pose(), self._sim_time()
        goal_handle.publish_feedback(nav2.feedback_msg(end, goal, now - started, now))
        self._state_after_skill()  # /sim/world_state, /clock and the views follow the base, as after a skill
        if result.succeeded:
            goal_handle.succeed()
        else:
            self.get_logger().info(f"navigate_to_pose aborted: nav2 error {int(result.error_code)}: {result.error_msg}")
            goal_handle.abort()
        return nav2.result_msg(result)

    def _on_follow_joint_trajectory(self, goal_handle):
        """ros2_control's FollowJointTrajectory on the physical arm (module docstring, "Physical mode")."""
        assert control is not None  # the server exists only in physical mode
        driver = self._driver()
        try:
            trajectory = control.trajectory_from_goal(goal_handle.request)
        except control.TrajectoryGoalError as err:
            goal_handle.abort()
            return control.trajectory_result_msg(TrajectoryResult(TrajectoryErrorCode.INVALID_GOAL, str(err)))
        result = self._skill(False, lambda: self._any_handle(driver, lambda: driver.follow_joint_trajectory(trajectory)))
        self._publish_motion()
        if trajectory.points and result.error_code not in (TrajectoryErrorCode.INVALID_GOAL, TrajectoryErrorCode.INVALID_JOINTS):
            with self._lock:
                actual, seconds = driver.joint_positions(), self._sim_time()
            desired = dict(zip(trajectory.joint_names, trajectory.points[-1].positions, strict=True))
            goal_handle.publish_feedback(control.trajectory_feedback_msg(
                trajectory.joint_names, desired, actual, seconds, trajectory.duration))
        self._state_after_skill()
        if result.succeeded:
            goal_handle.succeed()
        else:
            self.get_logger().info(f"follow_joint_trajectory aborted: error {int(result.error_code)}: {result.error_string}")
            goal_handle.abort()
        return control.trajectory_result_msg(result)

    def _on_gripper_command(self, goal_handle):
        """ros2_control's GripperCommand on the physical fingers (module docstring, "Physical mode")."""
        assert control is not None  # the server exists only in physical mode
        driver = self._driver()
        position, max_effort = control.gripper_goal(goal_handle.request)
        result = self._skill(False, lambda: self._any_handle(driver, lambda: driver.gripper_command(position, max_effort)))
        self._publish_motion()
        goal_handle.publish_feedback(control.gripper_feedback_msg(result))
        self._state_after_skill()
        if result.reached_goal or result.stalled:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return control.gripper_result_msg(result)

    # ------------------------------------------------------------------------------------ looks

    def _serve_looks(self, simulator: Simulator, group) -> tuple | None:
        """The head and torso controllers and the head camera's publishers (module docstring, "Looks"), when the
        backend moves those joints and control_msgs is importable; None otherwise."""
        if looks is None or control is None or not hasattr(simulator, "move_look_joints"):
            return None
        self._head_server = ActionServer(
            self, control.FollowJointTrajectory, looks.HEAD_TRAJECTORY,
            lambda handle: self._on_look_joints(handle, ("head_pan", "head_tilt")), goal_callback=self._accept,
            callback_group=group)
        self._torso_server = ActionServer(
            self, control.FollowJointTrajectory, looks.TORSO_TRAJECTORY,
            lambda handle: self._on_look_joints(handle, ("torso_lift",)), goal_callback=self._accept,
            callback_group=group)
        self._look_views_pub = self.create_publisher(MultiView, looks.LOOK_VIEWS, VIEWS_QOS)
        self.create_service(RenderViews, looks.LOOK_VIEWS_SERVICE, self._on_look_views, callback_group=group)
        return (self.create_publisher(MultiView, looks.HEAD_VIEWS, VIEWS_QOS),
                self.create_publisher(Image, looks.HEAD_IMAGE, SENSOR_QOS),
                self.create_publisher(Image, looks.HEAD_DEPTH, SENSOR_QOS),
                self.create_publisher(CameraInfo, looks.HEAD_CAMERA_INFO, SENSOR_QOS))

    def _on_look_views(self, request: RenderViews.Request, response: RenderViews.Response) -> RenderViews.Response:
        """The four views for a skill's look (module docstring, "Looks"): published on ``/perception/look_views``
        before the answer."""
        if not self._loaded:
            return response
        sequence, observation = self._observe()
        full = convert.observation_to_msg(observation)
        full.state_sequence = sequence
        self._look_views_pub.publish(full)
        response.views = _requested_views(full, request)
        return response

    def _on_look_joints(self, goal_handle, joints: tuple[str, ...]):
        """One head or torso goal (module docstring, "Looks"): the joints to the trajectory's last point; after a
        head goal, the head camera's view."""
        assert control is not None  # served only with control_msgs
        try:
            trajectory = control.trajectory_from_goal(goal_handle.request)
        except control.TrajectoryGoalError as err:
            goal_handle.abort()
            return control.trajectory_result_msg(TrajectoryResult(TrajectoryErrorCode.INVALID_GOAL, str(err)))
        unknown = sorted(set(trajectory.joint_names) - set(joints))
        if unknown or not trajectory.points:
            goal_handle.abort()
            code = TrajectoryErrorCode.INVALID_JOINTS if unknown else TrajectoryErrorCode.INVALID_GOAL
            why = f"this controller moves {', '.join(joints)}, not {', '.join(unknown)}" if unknown else "no points"
            return control.trajectory_result_msg(TrajectoryResult(code, why))
        desired = dict(zip(trajectory.joint_names, trajectory.points[-1].positions, strict=True))
        with self._lock:
            reached = self.sim.move_look_joints(desired, trajectory.duration)  # type: ignore[attr-defined]
            seconds = self._sim_time()
            view = self.sim.head_view() if "head_pan" in joints else None  # type: ignore[attr-defined]
            sequence = self._sequence
        goal_handle.publish_feedback(control.trajectory_feedback_msg(
            trajectory.joint_names, desired, reached, seconds, trajectory.duration))
        if view is not None and self._head_pubs is not None:
            full = convert.observation_to_msg(view)
            full.state_sequence = sequence
            views_pub, image_pub, depth_pub, info_pub = self._head_pubs
            views_pub.publish(full)
            for publisher, message in ((image_pub, full.views[0].rgb), (depth_pub, full.views[0].depth),
                                       (info_pub, full.views[0].camera_info)):
                if publisher.get_subscription_count() > 0:
                    publisher.publish(message)
        self._publish_clock()
        goal_handle.succeed()
        return control.trajectory_result_msg(TrajectoryResult(TrajectoryErrorCode.SUCCESSFUL, ""))

    # ------------------------------------------------------------------------------------ streamed targets

    def _serve_streamed_targets(self, group) -> None:
        """Physical mode: the arm controller's topic interface and the skill cameras' publishers (module docstring,
        "Streamed targets")."""
        from trajectory_msgs.msg import JointTrajectory

        from homiebot.ros import policy_skill

        self.create_subscription(JointTrajectory, policy_skill.STREAM_TOPIC, self._on_streamed_targets,
                                 policy_skill.STREAM_QOS, callback_group=group)
        from geometry_msgs.msg import Twist

        from homiebot.ros import policy_goto

        self.create_subscription(Twist, policy_goto.CMD_VEL, self._on_cmd_vel, policy_skill.STREAM_QOS,
                                 callback_group=group)
        if self._skill_camera_size > 0:
            self._skill_camera_pubs = {
                camera: (self.create_publisher(Image, policy_skill.image_topic(camera), SENSOR_QOS),
                         self.create_publisher(CameraInfo, policy_skill.info_topic(camera), SENSOR_QOS))
                for camera in (*policy_skill.ARM_CAMERAS, policy_goto.GOAL_CAMERA)}
            self.create_subscription(PoseStamped, policy_goto.GOAL_REQUEST_TOPIC, self._on_goal_photo, LATCHED_QOS,
                                     callback_group=group)

    def _on_streamed_targets(self, msg) -> None:
        """Streamed targets (module docstring): the message's points held in turn, physics advanced by their times;
        then ``/joint_states`` and the skill cameras at the end. A message the arm cannot take is logged and dropped,
        as a JointTrajectoryController drops it."""
        from homiebot.ros import policy_skill
        from homiebot.sim.mujoco import robot as robot_model

        if not self._loaded:
            self.get_logger().warning("streamed targets before any scene was loaded: dropped")
            return
        driver = self._driver()
        fingers = tuple(robot_model.FINGER_JOINTS)
        try:
            points = policy_skill.stream_points(msg)
            unknown = sorted({j for positions, _ in points for j in positions} - set(driver.joint_names) - set(fingers))
            if unknown:
                raise ValueError(f"joints {unknown} are neither the arm's {list(driver.joint_names)} nor the fingers")
        except ValueError as err:
            self.get_logger().warning(f"streamed targets dropped: {err}")
            return
        images, fovy = None, 0.0
        with self._lock:
            if not points:  # an empty trajectory: the arm stops where it is (the position actuators hold)
                self._close_stream()
                return
            stream = self._open_stream(driver)
            try:
                for positions, seconds in points:
                    arm = {j: v for j, v in positions.items() if j not in fingers}
                    given = [positions[f] for f in fingers if f in positions]
                    # Without both fingers the gripper keeps its setpoint (where the fingers are, before any).
                    gap = sum(given) if len(given) == len(fingers) else policy_skill.gripper_setpoint(driver, stream)
                    if seconds > 0:
                        stream.send(arm, gap, seconds)
            except Exception as err:  # noqa: BLE001 - the simulator stopped (MuJoCo's FatalError): end the stream, say it
                self.get_logger().error(f"streamed targets: {err}")
                self._close_stream()
                return
            now = self._sim_time()
            pose = self._base_pose_now()
            joints = dict(self.sim.joint_positions())  # type: ignore[attr-defined]
            wanted = tuple(c for c, (image_pub, _) in self._skill_camera_pubs.items()
                           if c != "goal" and image_pub.get_subscription_count() > 0)
            if wanted:
                try:
                    images, fovy = self._render_skill_cameras(stream, wanted)
                except Exception as err:  # noqa: BLE001 - a renderer that cannot start: said, the joints still go out
                    self.get_logger().error(f"the skill cameras cannot render: {err}")
        self._joints_pub.publish(self._joint_state(pose, joints, now))
        self._publish_odom(pose, now)
        self._clock_pub.publish(Clock(clock=convert.time_msg(now)))  # rviz and tf2 on use_sim_time follow the stream
        if images:
            for camera, (image, info) in policy_skill.camera_msgs(images, fovy, now).items():
                image_pub, info_pub = self._skill_camera_pubs[camera]
                image_pub.publish(image)
                info_pub.publish(info)

    def _open_stream(self, driver):
        """The open setpoint stream, opened now when none is (called holding the lock)."""
        if self._stream is None:
            self._stream_started = self._sim_time()
            self._stream_context = driver.setpoint_stream("streamed targets (/arm_controller/joint_trajectory)")
            self._stream = self._stream_context.__enter__()
        return self._stream

    def _close_stream(self) -> None:
        """End the open stream, if any (called holding the lock): physics written back to the simulator's state,
        its clock advanced by what the stream ran, a new world version. A run of ``/cmd_vel`` messages ends too."""
        self._cmd_vel_open = False
        context, self._stream, self._stream_context = self._stream_context, None, None
        if context is not None:
            context.__exit__(None, None, None)
            self._sequence += 1

    def _render_skill_cameras(self, stream, cameras: tuple[str, ...]):
        """The skill cameras' images of the stream's physics now, and their vertical field of view (degrees)."""
        from homiebot.ros import policy_skill

        return self._skill_camera_set(stream.model).render(stream.data, cameras), policy_skill.head_fovy(stream.model)

    def _skill_camera_set(self, model):
        """The skill cameras of ``model`` (made again for a new scene's model)."""
        from homiebot.sim.mujoco.skill_cameras import SkillCameras

        if self._skill_cameras is None or self._skill_cameras.model is not model:
            if self._skill_cameras is not None:
                self._skill_cameras.close()
            self._skill_cameras = SkillCameras(model, self._skill_camera_size)
        return self._skill_cameras

    # ------------------------------------------------------------------------------------ base velocity

    def _on_cmd_vel(self, msg) -> None:
        """Base velocity (module docstring): the twist held for one period, then the robot's state and head camera."""
        if not self._loaded:
            self.get_logger().warning("/cmd_vel before any scene was loaded: dropped")
            return
        if msg.linear.x == 0.0 and msg.angular.z == 0.0:
            self._stop_base()
            return
        driver = self._driver()
        with self._lock:
            if self._stream is not None:
                self._close_stream()
            if not self._cmd_vel_open:  # a new run: what the base touches now, it may leave
                self._cmd_vel_tolerated = driver.base_contact()
                self._cmd_vel_open = True
            driver.base_velocity(float(msg.linear.x), float(msg.angular.z), self._cmd_vel_period,
                                 self._cmd_vel_tolerated)
            if self._cmd_vel_tolerated is not None and driver.base_contact() != self._cmd_vel_tolerated:
                self._cmd_vel_tolerated = None  # left it: from here on every contact stops the base
            self._sequence += 1
        self._publish_base_frame()

    def _stop_base(self) -> None:
        """A zero twist (module docstring, "Base velocity"): the run of twists ends (the next one starts a new run, its
        contact read again); nothing moves and the clock stands still, so the stop a policy node sends when its run
        ends leaves the world as the in-process Go to leaves it. Then the robot's state as it is, unless an arm stream
        is open (its frames are the stream's)."""
        with self._lock:
            self._cmd_vel_open = False
            self._cmd_vel_tolerated = None
            streaming = self._stream is not None
        if not streaming:
            self._publish_base_frame()

    def _on_goal_photo(self, msg: PoseStamped) -> None:
        """The goal photo (module docstring): the head camera with the base at the requested pose, stamped with the
        request's stamp; then the run's first frame."""
        if not self._loaded:
            self.get_logger().warning("goal photo asked for before any scene was loaded: dropped")
            return
        from homiebot.ros import policy_goto, policy_skill

        image_pub, info_pub = self._skill_camera_pubs[policy_goto.GOAL_CAMERA]
        goal = convert.pose_to_pose2d(msg.pose)
        try:
            with self._lock:
                self._close_stream()
                image, fovy = self._render_head_at(goal)
        except Exception as err:  # noqa: BLE001 - a renderer that cannot start: said, nothing answered
            self.get_logger().error(f"the goal photo cannot render: {err}")
            return
        photo, info = policy_skill.camera_msgs({policy_goto.GOAL_CAMERA: image}, fovy, 0.0)[policy_goto.GOAL_CAMERA]
        photo.header.stamp = info.header.stamp = msg.header.stamp
        image_pub.publish(photo)
        info_pub.publish(info)
        self._publish_base_frame()

    def _render_head_at(self, pose: Pose2D | None):
        """The head skill camera with the base at ``pose`` (None: where it is), as the in-process Go to renders it
        (``skill_observation.head_at``), the base put back afterwards; and the camera's field of view (called holding
        the lock)."""
        import mujoco

        from homiebot.ros import policy_skill
        from homiebot.sim.mujoco.skill_observation import base_qpos, head_at

        compiled, data = self.sim.physics_handles()  # type: ignore[attr-defined]  # MujocoSimulator (physical mode)
        model = compiled.model
        base = base_qpos(model)
        here = self.sim.base_pose()  # type: ignore[attr-defined]  # MujocoSimulator (physical mode)
        image = np.asarray(head_at(self._skill_camera_set(model), model, data, base, pose or here))
        if pose is not None:
            data.qpos[base] = (here.x, here.y, here.yaw)
            mujoco.mj_forward(model, data)
        return image, policy_skill.head_fovy(model)

    def _publish_base_frame(self) -> None:
        """``/joint_states``, ``/odom``, ``/clock`` and the head camera (to its subscribers) as the robot is now."""
        from homiebot.ros import policy_skill

        head = self._skill_camera_pubs.get("head")
        image = None
        with self._lock:
            now, pose = self._sim_time(), self._base_pose_now()
            joints = dict(self.sim.joint_positions())  # type: ignore[attr-defined]
            if head is not None and head[0].get_subscription_count() > 0:
                try:
                    image, fovy = self._render_head_at(None)
                except Exception as err:  # noqa: BLE001 - a renderer that cannot start: said, the state still goes out
                    self.get_logger().error(f"the head camera cannot render: {err}")
        self._joints_pub.publish(self._joint_state(pose, joints, now))
        self._publish_odom(pose, now)
        self._clock_pub.publish(Clock(clock=convert.time_msg(now)))
        if image is not None and head is not None:
            msg, info = policy_skill.camera_msgs({"head": image}, fovy, now)["head"]
            head[0].publish(msg)
            head[1].publish(info)

    def _publish_robot_state(self) -> None:
        """Physical mode: ``/joint_states`` and ``/odom`` now, to their subscribers (module docstring)."""
        joints_wanted = self._joints_pub.get_subscription_count() > 0
        odom_wanted = self._odom_pub.get_subscription_count() > 0
        if not self._loaded or not (joints_wanted or odom_wanted):
            return
        sim = self.sim
        with self._lock:
            pose, seconds = self._base_pose_now(), self._sim_time()
            reported = dict(sim.joint_positions()) if joints_wanted else None  # type: ignore[attr-defined]
        if joints_wanted:
            self._joints_pub.publish(self._joint_state(pose, reported, seconds))
        if odom_wanted:
            self._publish_odom(pose, seconds)

    def _publish_odom(self, pose: Pose2D, seconds: float) -> None:
        odom = Odometry(header=convert.header(seconds, convert.ODOM_FRAME), child_frame_id=convert.BASE_FRAME)
        odom.pose.pose = convert.pose2d_to_pose(pose)
        self._odom_pub.publish(odom)

    def _base_pose_now(self) -> Pose2D:
        """The base's pose (called holding the lock): while a stream is open, where physics has it (the arm's motion
        moves the base a little, as the stream writes back at its end), else the simulator's."""
        if self._stream is not None:
            from homiebot.ros import policy_skill

            return policy_skill.stream_base_pose(self._stream)
        return self.sim.base_pose()  # type: ignore[attr-defined]  # MujocoSimulator (physical mode)

    def _state_after_skill(self, agent: int = 0) -> WorldStateMsg:
        """The state a skill left, for its result (``agent``'s view of it); the robot's view is published (and
        its views pre-rendered) after the answer, the human's on /human/sim/world_state."""
        msg = self._state_msg(*self._state())
        self._publish_clock()
        self._pending_state = msg
        self._after_skill.reset()
        if agent == 0:
            return msg
        mine = self._state_msg(*self._agent_state(agent))
        self._publish_human_state(mine)
        return mine

    def _on_manipulate(self, goal_handle, agent: int = 0):
        goal = goal_handle.request
        sim = self._agent_sim(agent)

        def attempt(action: Action, place: str | None = None):
            return lambda: self._attempt(action, goal.model, goal.object, place, agent=agent)

        operations = {
            Manipulate.Goal.PICK: attempt(Action.PICK),
            Manipulate.Goal.PUT: attempt(Action.PUT, goal.place),
            Manipulate.Goal.OPEN: attempt(Action.OPEN),
            Manipulate.Goal.CLOSE: attempt(Action.CLOSE),
            # The household skills (docs/textworld.md) that PARTNR-style tasks need.
            Manipulate.Goal.TURN_ON: attempt(Action.TURN_ON),
            Manipulate.Goal.TURN_OFF: attempt(Action.TURN_OFF),
            Manipulate.Goal.CLEAN: attempt(Action.CLEAN, goal.place),
            Manipulate.Goal.HEAT: attempt(Action.HEAT, goal.place),
            Manipulate.Goal.COOL: attempt(Action.COOL, goal.place),
            # PARTNR's liquid skills (the human's; the executor refuses them to the robot).
            Manipulate.Goal.FILL: attempt(Action.FILL, goal.place),
            Manipulate.Goal.POUR: attempt(Action.POUR, goal.place),
        }
        if goal.operation == Manipulate.Goal.RESET_ARM:
            result = self._skill(False, lambda: (sim.reset_arm(), SkillResult(SkillStatus.SUCCESS))[1])
        elif goal.operation in operations:
            result = self._skill(goal.reset_arm_first, operations[goal.operation], sim)
        else:
            result = SkillResult(SkillStatus.EXECUTION_FAILED, f"unknown manipulation operation {goal.operation}")
        self._publish_motion()  # a physical Open or Close, or the arm's tuck before one
        state = self._state_after_skill(agent)
        goal_handle.succeed()
        return Manipulate.Result(result=convert.skill_result_to_msg(result), state=state)

    # ------------------------------------------------------------------------------------ the human partner

    def _agent_sim(self, agent: int) -> Simulator:
        return self.sim if agent == 0 else self.sim.agent(agent)

    def _agent_state(self, agent: int):
        with self._lock:
            self._close_stream()
            return self._sequence, self._agent_sim(agent).state()

    def _serve_human(self, group) -> None:
        """The human's services, skill actions and topics under ``/human`` (module docstring)."""
        ns = HUMAN_NAMESPACE
        self.create_service(GetWorldState, "/sim/begin_round", self._on_begin_round, callback_group=group)
        self.create_service(GetWorldState, f"{ns}/sim/get_world_state", self._on_human_state, callback_group=group)
        self.create_service(RenderViews, f"{ns}/sim/render_views", self._on_human_render, callback_group=group)
        self._human_navigate = ActionServer(self, Navigate, f"{ns}/sim/navigate",
                                            lambda handle: self._on_navigate(handle, HUMAN),
                                            goal_callback=self._accept, callback_group=group)
        self._human_manipulate = ActionServer(self, Manipulate, f"{ns}/sim/manipulate",
                                              lambda handle: self._on_manipulate(handle, HUMAN),
                                              goal_callback=self._accept, callback_group=group)
        self._human_pubs = {
            "views": self.create_publisher(MultiView, f"{ns}/homie/views", VIEWS_QOS),
            "state": self.create_publisher(WorldStateMsg, f"{ns}/sim/world_state", EVENTS_QOS),
            "odom": self.create_publisher(Odometry, f"{ns}/odom", SENSOR_QOS),
        }
        # The human's cameras on their own topics, as the robot's (/human/camera/<view>/...), in its own frames.
        self._human_camera_pubs = self._camera_publishers(ns)

    def _on_begin_round(self, request: GetWorldState.Request, response: GetWorldState.Response) -> GetWorldState.Response:
        """A lock-step round begins (homiebot.agent.in_process.InProcessBackend.begin_round): the agents' clocks
        are synced. Nothing in the world moved, so its version stays (views cached before keep their stamp)."""
        if self._loaded:
            with self._lock:
                self._close_stream()
                self.sim.sync_clocks()
            response.state = self._state_msg(*self._state())
            self._publish_clock()
        return response

    def _on_human_state(self, request: GetWorldState.Request, response: GetWorldState.Response) -> GetWorldState.Response:
        """The world from the human's side; published on ``/human/sim/world_state`` as the robot's state is on
        ``/sim/world_state`` (once per world version): a bag then holds the state of every human round."""
        if self._loaded:
            response.state = self._state_msg(*self._agent_state(HUMAN))
            self._publish_human_state(response.state)
        return response

    def _publish_human_state(self, msg: WorldStateMsg) -> None:
        if msg.state_sequence != self._published_human_sequence:
            self._published_human_sequence = msg.state_sequence
            self._human_pubs["state"].publish(msg)  # type: ignore[attr-defined]

    def _on_human_render(self, request: RenderViews.Request, response: RenderViews.Response) -> RenderViews.Response:
        """The human's four views (its own cameras), cached per world version like the robot's; published on
        ``/human/homie/views`` and ``/human/camera/<view>/...`` with the human's odometry and frames."""
        if not self._loaded:
            return response
        full, observation = self._human_views()
        response.views = _requested_views(full, request)
        self._publish_human_sensors(full, observation)
        return response

    def _human_views(self) -> tuple[MultiView, Observation]:
        """The human's views of the current world version (rendered once per version), in the human's frames."""
        with self._lock:
            cached = self._agent_cached.get(HUMAN)
            if cached is None or cached[0] != self._sequence:
                cached = self._agent_cached[HUMAN] = (self._sequence, self.sim.agent(HUMAN).observe())
        sequence, observation = cached
        full = convert.observation_to_msg(observation)
        full.state_sequence = sequence
        _in_frames_of(full, HUMAN_FRAME_PREFIX)
        return full, observation

    def _publish_human_sensors(self, full: MultiView, observation: Observation) -> None:
        """The human's MultiView, per-camera topics (to their subscribers), odometry, base on ``/tf`` and camera
        mounts on ``/tf_static``."""
        self._human_pubs["views"].publish(full)  # type: ignore[attr-defined]
        self._publish_cameras(self._human_camera_pubs, full)
        base = f"{HUMAN_FRAME_PREFIX}{convert.BASE_FRAME}"
        pose = convert.pose2d_to_pose(observation.robot_pose)
        odom = Odometry(header=convert.header(observation.sim_time, convert.ODOM_FRAME), child_frame_id=base)
        odom.pose.pose = pose
        self._human_pubs["odom"].publish(odom)  # type: ignore[attr-defined]
        if self._tf_pub is not None and self._tf_pub.get_subscription_count() > 0:
            # The human's base in the one odom frame (rviz shows both agents): odom -> human/base_link.
            self._tf_pub.publish(TFMessage(transforms=[
                convert.transform_stamped(pose, convert.ODOM_FRAME, base, observation.sim_time)]))
        self._latch_mounts(HUMAN_FRAME_PREFIX, full, pose, observation.sim_time)

    def destroy_node(self) -> None:
        self.sim.shutdown()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    spin_node(SimBridge, args)


if __name__ == "__main__":
    main()

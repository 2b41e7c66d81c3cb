"""Robot profiles: which robot the graph drives, and by which ROS 2 names and types it reaches it.

A profile is a YAML file (docs/robots.md): the interfaces the skill layer calls or reads (a navigation action, the
arm's trajectory action, the gripper's command, odometry, joint states, tf, cameras with their ``CameraInfo``),
the frames, the arm's kinematic chain and joint names, and the gripper's limits. ``simulated: true`` means the sim
bridge serves these interfaces; otherwise the graph starts without the bridge and waits for the robot's own
servers (:mod:`homiebot.ros.robot_interfaces`).

Robots differ in interface *types*, not only names: a Jazzy robot with Nav2 and ros2_control serves
``nav2_msgs/action/NavigateToPose`` and ``control_msgs`` actions, Spot's driver serves its own ``spot_msgs``
actions and ``std_srvs/Trigger`` services. So a profile names an ``adapter`` (the skill layer's lower side for
that family of robots), and each adapter lists the roles a profile must fill and the type each role must have:
a profile with a typo in a type, or one that misses a role its adapter calls, is refused when it is loaded.

Built-in profiles live beside this module in ``robots/`` (``sim``, ``fetch``, ``spot``); any other path to a
YAML file works too. Family: pydantic, frozen, ``extra="forbid"`` (the input is text), as
:mod:`homiebot.config.run`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from homiebot.config import Choice
from homiebot.config.planners import validation_message

#: Where the built-in profiles are (``<name>.yaml``).
PROFILE_DIR = Path(__file__).with_name("robots")
#: The profile of the simulator's robot, which ``homie up sim`` and ``sim.launch.py`` use by default.
SIM_PROFILE = "sim"

_TYPE_PATTERN = re.compile(r"^[a-z][a-z0-9_]*/(msg|srv|action)/[A-Z][A-Za-z0-9]*$")
_NAME_PATTERN = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")
_FRAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_/]*$")


class RobotProfileError(ValueError):
    """A profile that cannot be found or read, or that does not validate: its message is one line."""


class InterfaceKind(Choice):
    """How an interface is reached on the graph: read from the type's middle part (``pkg/<kind>/Type``)."""

    TOPIC = "topic"
    SERVICE = "service"
    ACTION = "action"


class Adapter(Choice):
    """The skill layer's lower side for a family of robots (docs/robots.md, "Adapters")."""

    #: The simulator bridge's own skill actions (homie_msgs Navigate / Manipulate): the oracle skills.
    SIMULATOR = "simulator"
    #: A Jazzy robot with Nav2 and ros2_control: NavigateToPose, FollowJointTrajectory, GripperCommand.
    GENERIC = "generic"
    #: Boston Dynamics Spot through spot_ros2: spot_msgs actions and std_srvs/Trigger gripper services.
    SPOT = "spot"


_KIND_BY_PART = {"msg": InterfaceKind.TOPIC, "srv": InterfaceKind.SERVICE, "action": InterfaceKind.ACTION}

#: Per adapter, the roles a profile must fill and the type each one must have. Roles outside this table are
#: allowed (an ``extra`` entry the adapter does not call yet, e.g. Fetch's head controller) but not waited for
#: unless listed in ``wait_for``.
ADAPTER_ROLES: dict[Adapter, dict[str, str]] = {
    Adapter.SIMULATOR: {
        "navigate": "homie_msgs/action/Navigate",
        "manipulate": "homie_msgs/action/Manipulate",
        "odom": "nav_msgs/msg/Odometry",
        "joint_states": "sensor_msgs/msg/JointState",
        "tf": "tf2_msgs/msg/TFMessage",
        "tf_static": "tf2_msgs/msg/TFMessage",
    },
    Adapter.GENERIC: {
        "navigate": "nav2_msgs/action/NavigateToPose",
        "arm_trajectory": "control_msgs/action/FollowJointTrajectory",
        "gripper": "control_msgs/action/GripperCommand",
        "odom": "nav_msgs/msg/Odometry",
        "joint_states": "sensor_msgs/msg/JointState",
        "tf": "tf2_msgs/msg/TFMessage",
        "tf_static": "tf2_msgs/msg/TFMessage",
    },
    Adapter.SPOT: {
        "body_trajectory": "spot_msgs/action/Trajectory",
        "manipulation": "spot_msgs/action/Manipulation",
        "gripper_open": "std_srvs/srv/Trigger",
        "gripper_close": "std_srvs/srv/Trigger",
        "odom": "nav_msgs/msg/Odometry",
        "joint_states": "sensor_msgs/msg/JointState",
        "tf": "tf2_msgs/msg/TFMessage",
        "tf_static": "tf2_msgs/msg/TFMessage",
    },
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RobotInterface(_Section):
    """One named, typed interface on the robot's graph: a topic, a service or an action."""

    name: str = Field(description="Fully qualified name, e.g. /navigate_to_pose.")
    type: str = Field(description="Interface type, e.g. nav2_msgs/action/NavigateToPose.")

    @field_validator("name")
    @classmethod
    def _absolute_name(cls, value: str) -> str:
        if not _NAME_PATTERN.match(value):
            raise ValueError(f"{value!r} is not a fully qualified ROS 2 name (/a/b, letters, digits, _)")
        return value

    @field_validator("type")
    @classmethod
    def _full_type(cls, value: str) -> str:
        if not _TYPE_PATTERN.match(value):
            raise ValueError(f"{value!r} is not a ROS 2 interface type (package/msg|srv|action/Name)")
        return value

    @property
    def kind(self) -> InterfaceKind:
        return _KIND_BY_PART[self.type.split("/")[1]]


class Frames(_Section):
    """The REP 105 frames the skill layer reads poses in."""

    map: str = "map"
    odom: str = "odom"
    base: str = "base_link"

    @field_validator("map", "odom", "base")
    @classmethod
    def _frame_id(cls, value: str) -> str:
        if not _FRAME_PATTERN.match(value):
            raise ValueError(f"{value!r} is not a frame id")
        return value


class Camera(_Section):
    """A camera: its image and the ``CameraInfo`` beside it (image_transport's convention), optionally depth."""

    name: str
    image: RobotInterface
    camera_info: RobotInterface
    depth: RobotInterface | None = None
    #: The optical frame its images are stamped with (None: not documented; read it from the first image).
    optical_frame: str | None = None

    @model_validator(mode="after")
    def _types(self) -> Camera:
        for label, interface, wanted in (("image", self.image, "sensor_msgs/msg/Image"),
                                         ("camera_info", self.camera_info, "sensor_msgs/msg/CameraInfo"),
                                         ("depth", self.depth, "sensor_msgs/msg/Image")):
            if interface is not None and interface.type != wanted:
                raise ValueError(f"camera {self.name!r}: {label} must be {wanted}, not {interface.type}")
        return self


class ArmChain(_Section):
    """The arm as inverse kinematics sees it: the chain from ``base_link`` to ``tip_link`` and its joints, in the
    order the trajectory controller takes them."""

    base_link: str
    tip_link: str
    joints: tuple[str, ...] = Field(min_length=1)

    @field_validator("joints")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"joint names repeat: {list(value)}")
        return value


class Gripper(_Section):
    """The gripper's joints and command range (``control_msgs/GripperCommand``: position, max_effort)."""

    joints: tuple[str, ...] = Field(min_length=1)
    #: Command position when closed and when fully open, in the unit of ``position_unit``.
    closed_position: float
    open_position: float
    position_unit: Literal["m", "rad", "deg"] = "m"
    #: The most effort a goal may ask for, N (None: not known or not modelled; the command then sends 0,
    #: which GripperActionController reads as "no limit").
    max_effort_n: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _range(self) -> Gripper:
        if self.open_position == self.closed_position:
            raise ValueError("open_position equals closed_position")
        return self


class RobotProfile(_Section):
    """A robot the graph can drive: see the module's docstring and docs/robots.md."""

    name: str
    description: str = ""
    #: True: the sim bridge serves the interfaces (``homie up sim``); false: a robot's own drivers do.
    simulated: bool
    adapter: Adapter
    #: The ROS 2 distribution the robot's driver is built for (Jazzy peers do not reliably talk to others).
    ros_distro: str
    frames: Frames = Frames()
    interfaces: dict[str, RobotInterface]
    cameras: tuple[Camera, ...] = ()
    arm: ArmChain
    gripper: Gripper
    #: Extra interfaces to wait for beyond the adapter's roles and the cameras (role names of ``interfaces``).
    wait_for: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _adapter_roles(self) -> RobotProfile:
        required = ADAPTER_ROLES[self.adapter]
        missing = [role for role in required if role not in self.interfaces]
        if missing:
            raise ValueError(f"adapter {self.adapter} needs interfaces {', '.join(missing)}")
        for role, wanted in required.items():
            if self.interfaces[role].type != wanted:
                raise ValueError(f"interfaces.{role}: adapter {self.adapter} calls it as {wanted}, "
                                 f"not {self.interfaces[role].type}")
        unknown = [role for role in self.wait_for if role not in self.interfaces]
        if unknown:
            raise ValueError(f"wait_for names roles that interfaces lacks: {', '.join(unknown)}")
        return self

    def awaited(self) -> tuple[tuple[str, RobotInterface], ...]:
        """What the graph waits for on a robot, as (label, interface): the adapter's roles in its order, the
        ``wait_for`` extras, then each camera's image and ``CameraInfo`` (labels ``camera.<name>.image`` ...)."""
        roles = list(ADAPTER_ROLES[self.adapter]) + [r for r in self.wait_for if r not in ADAPTER_ROLES[self.adapter]]
        awaited = [(role, self.interfaces[role]) for role in roles]
        for camera in self.cameras:
            awaited.append((f"camera.{camera.name}.image", camera.image))
            awaited.append((f"camera.{camera.name}.camera_info", camera.camera_info))
        return tuple(awaited)


def builtin_profiles() -> tuple[str, ...]:
    """The names of the profiles shipped beside this module."""
    return tuple(sorted(path.stem for path in PROFILE_DIR.glob("*.yaml")))


def profile_path(name_or_path: str | Path) -> Path:
    """A built-in profile's file by its name, or the given path; :class:`RobotProfileError` when neither exists."""
    text = str(name_or_path)
    if not text.endswith((".yaml", ".yml")) and "/" not in text:
        path = PROFILE_DIR / f"{text}.yaml"
        if path.is_file():
            return path
        raise RobotProfileError(f"no robot profile {text!r}: the built-in ones are {', '.join(builtin_profiles())}, "
                                f"or give a path to a YAML file")
    path = Path(text)
    if not path.is_file():
        raise RobotProfileError(f"robot profile {text}: no such file")
    return path


def load_profile(name_or_path: str | Path) -> RobotProfile:
    """Read and validate a profile (a built-in name or a path); every problem is one-line :class:`RobotProfileError`."""
    path = profile_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise RobotProfileError(f"robot profile {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise RobotProfileError(f"robot profile {path}: not valid YAML: {problem}{where}") from None
    if not isinstance(data, dict):
        raise RobotProfileError(f"robot profile {path}: expected a mapping at the top")
    try:
        return RobotProfile.model_validate(data)
    except ValidationError as err:
        raise RobotProfileError(f"robot profile {path}: {validation_message(err)}") from None

"""One frame of what an arm skill's policy sees and does, read from the simulator's MuJoCo data: the one definition the
recorder of skill data sets (homiebot/data/skill_datasets.py) and the learned skill that serves a policy trained on
them (homiebot/skills/learned_skill.py) share, so that a served policy is observed exactly as its data was recorded.

* ``observation.images.<camera>``: :class:`~homiebot.sim.mujoco.skill_cameras.SkillCameras`' images (the head camera
  and the wrist camera, ``size`` x ``size`` RGB; ``<camera>_marked``: the same with the skill's target tinted, from
  the simulator's segmentation of it, the perception stack's mask on a real robot);
* ``observation.state``: the positions of :data:`JOINTS` (the torso lift, the seven arm joints, the two fingers);
* ``observation.environment_state``: which thing the skill is for, as the robot knows it before it reaches: the
  target's box (centre and extent, :data:`TARGET_STATE`) in the base's frame at that frame (:func:`target_state`),
  from the world graph's box of it when the skill started;
* ``action``: the position targets the controllers send now (``data.ctrl`` of the same joints' actuators: the
  trajectory controller's setpoint for the torso and arm, the gripper controller's for each finger).

Go to's frame (the base's skill; :func:`head_at`, :func:`goal_in_base`): the head camera with the base at its pose
then, ``observation.images.goal`` the head camera with the base at the goal pose (image-goal navigation, as PixNav
and NoMaD take a goal: Cai et al. 2023, "Bridging Zero-shot Object Navigation and Foundation Models through
Pixel-Guided Navigation Skill"; Sridhar et al. 2023, "NoMaD: Goal Masked Diffusion Policies for Navigation and
Exploration"), ``observation.state`` the goal pose in the base's frame (:data:`GOAL_STATE`), and ``action`` the base's
velocity (:data:`BASE_VELOCITY`).

Frames are taken :data:`FPS` times per second of simulated time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from homiebot.sim.mujoco import robot as robot_model
from homiebot.types import Pose2D

#: Frames (control steps) per second of simulated time.
FPS = 10
#: observation.state's and action's names, in order.
JOINTS: tuple[str, ...] = ("torso_lift", *robot_model.ARM_JOINTS, *robot_model.FINGER_JOINTS)
#: observation.environment_state of the arm's skills: the target's axis-aligned box in the base's frame (centre, m;
#: extent along the base's axes, m), module docstring.
TARGET_STATE: tuple[str, ...] = ("target_x", "target_y", "target_z", "target_size_x", "target_size_y", "target_size_z")
#: Go to's action: the base's velocity in its own frame (geometry_msgs/Twist's fields a planar base uses: m/s, rad/s),
#: and its observation.state: the goal pose in the base's frame now (m, m, rad).
BASE_VELOCITY: tuple[str, ...] = ("linear_x", "angular_z")
GOAL_STATE: tuple[str, ...] = ("goal_x", "goal_y", "goal_yaw")
#: Go to's cameras: the head camera where the base is, and where the goal pose would put it.
GO_TO_CAMERAS: tuple[str, ...] = ("head", "goal")
#: The keys of one frame.
IMAGE_KEY = "observation.images.{}"
STATE_KEY = "observation.state"
ENV_STATE_KEY = "observation.environment_state"
ACTION_KEY = "action"
#: A box in the world frame: (min corner, max corner).
Box = tuple[Sequence[float], Sequence[float]]


def target_state(box_min: Sequence[float], box_max: Sequence[float], base_x: float, base_y: float,
                 base_yaw: float) -> np.ndarray:
    """The target's box (world frame, axis-aligned) as :data:`TARGET_STATE`, seen from a base at (x, y, yaw): its
    centre in the base's frame (x ahead, y left, z up from the floor) and the extent of the box along the base's axes
    (the world box's extent turned by the base's heading; a box is given axis-aligned by the world graph)."""
    lo, hi = np.asarray(box_min, dtype=float), np.asarray(box_max, dtype=float)
    centre, size = (lo + hi) / 2.0, hi - lo
    c, s = math.cos(base_yaw), math.sin(base_yaw)
    dx, dy = centre[0] - base_x, centre[1] - base_y
    extent_x = abs(c) * size[0] + abs(s) * size[1]
    extent_y = abs(s) * size[0] + abs(c) * size[1]
    return np.array([c * dx + s * dy, -s * dx + c * dy, centre[2], extent_x, extent_y, size[2]], dtype=np.float32)


def goal_in_base(pose: Pose2D, goal: Pose2D) -> tuple[float, float, float]:
    """``goal`` in the frame of a base at ``pose`` (x ahead, y left, yaw): Go to's ``observation.state``."""
    dx, dy = goal.x - pose.x, goal.y - pose.y
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    return c * dx + s * dy, -s * dx + c * dy, math.remainder(goal.yaw - pose.yaw, 2 * math.pi)


def base_qpos(model: mujoco.MjModel) -> np.ndarray:
    """The qpos addresses of the robot's planar base joints (x, y, yaw)."""
    return np.array([model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, robot_model.ROBOT_PREFIX + j)]
                     for j in robot_model.BASE_JOINTS])


def head_at(cameras: Any, model: mujoco.MjModel, data: mujoco.MjData, base: np.ndarray, pose: Pose2D) -> np.ndarray:
    """The head camera's image with the base put at ``pose`` (``base``: :func:`base_qpos`): Go to's
    ``observation.images.head`` at the base's pose, and ``observation.images.goal`` at the goal's. It writes the base's
    qpos and the kinematics: the caller puts the base back (and calls ``mj_forward``) when done."""
    data.qpos[base] = (pose.x, pose.y, pose.yaw)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_camlight(model, data)
    return np.asarray(cameras.render(data, ("head",))["head"])


def physics_steps_per_frame(model: mujoco.MjModel) -> int:
    """How many physics steps one frame (1/FPS s) is on ``model``."""
    return max(1, round(1.0 / (FPS * model.opt.timestep)))


class SkillObservation:
    """Reads frames of one compiled model: ``cameras`` (a ``SkillCameras`` of that model) and the joints' addresses."""

    def __init__(self, cameras: Any, model: mujoco.MjModel) -> None:
        self.cameras = cameras
        prefix = robot_model.ROBOT_PREFIX
        joint_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, prefix + j) for j in JOINTS]
        self.qpos = np.array([model.jnt_qposadr[j] for j in joint_ids])
        self.base = np.array([model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, prefix + j)]
                              for j in robot_model.BASE_JOINTS])
        by_joint = {int(model.actuator_trnid[i, 0]): i for i in range(model.nu)}
        self.ctrl = np.array([by_joint[j] for j in joint_ids])

    def observe(self, data: mujoco.MjData, target: Box | None = None,
                cameras: tuple[str, ...] | None = None, marks: frozenset[int] | None = None) -> dict[str, np.ndarray]:
        """The cameras' images (all, or ``cameras``: plain, or ``<camera>_marked`` with the geoms ``marks`` of the
        target marked, homiebot/sim/mujoco/skill_cameras.py), the joints' positions and, with ``target`` (its world box
        when the skill started), the target's box in the base's frame now (``observation.*`` keys)."""
        images = self.cameras.render(data) if cameras is None else self.cameras.render(data, cameras, marks)
        frame = {**{IMAGE_KEY.format(cam): image for cam, image in images.items()},
                 STATE_KEY: data.qpos[self.qpos].astype(np.float32)}
        if target is not None:
            frame[ENV_STATE_KEY] = target_state(*target, *data.qpos[self.base])
        return frame

    def state(self, data: mujoco.MjData) -> np.ndarray:
        return np.asarray(data.qpos[self.qpos], dtype=np.float32)

    def command(self, data: mujoco.MjData) -> np.ndarray:
        """The controllers' position targets now (the ``action`` of a frame)."""
        return np.asarray(data.ctrl[self.ctrl], dtype=np.float32)

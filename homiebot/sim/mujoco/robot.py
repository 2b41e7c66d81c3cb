"""A Fetch-class mobile manipulator for the embedded simulator: an honest simplified model.

Why not gymnasium-robotics' Fetch MJCF: its base is welded to the world, its arm is driven by a mocap
weld instead of joint actuators, and it renders 40+ STL meshes. Turning it into a mobile robot means
rewriting most of it (a planar base, actuators, new collision geometry), adds gymnasium and the mesh
assets as dependencies, and costs render time on every one of the four views. So this module builds
the robot from primitives with Fetch's published proportions instead:

* planar base: slide x, slide y, hinge yaw at the root (``base_x``, ``base_y``, ``base_yaw``); a
  cylinder of radius 0.28 m (Fetch's base is 0.56 m across); the planner-facing footprint radius is
  :data:`ROBOT_RADIUS` = 0.30 m (2 cm safety margin);
* torso lift (prismatic, 0..0.386 m), head pan/tilt;
* a 7-DoF arm (shoulder pan/lift, upper-arm roll, elbow flex, forearm roll, wrist flex/roll, Fetch's
  joint order and approximate link lengths) and a parallel gripper with two slide fingers;
* a position actuator on every joint, so the model can also be driven dynamically;
* four fixed head-height cameras (``cam_front`` / ``cam_left`` / ``cam_back`` / ``cam_right``) on the base,
  rotated 0/90/180/270 degrees and tilted :data:`CAMERA_TILT` down. EMMOE turns the robot in place to take
  its four views; fixed cameras give the same images without moving the base;
* a head camera (``cam_head``, :data:`HEAD_CAMERA`) on the head tilt link, as Fetch's head camera: it moves with
  the torso lift and the head's pan and tilt, so the robot can raise its torso and look down into a sink's basin
  or a pulled-out drawer (:func:`head_angles`), which the fixed cameras see only from the side.

The robot's own body is in geom group 3, which the first-person views hide (the cameras sit inside the
head); only the gripper fingers (group 1) stay visible so that a held object shows in the front view.
The oracle skills set joint positions kinematically (as Habitat's oracle skills snap the agent), and the
base footprint is collision-checked against walls and furniture along every path.
"""

from __future__ import annotations

import math

import numpy as np

#: Footprint radius used for planning and for ``WorldState.robot_radius`` (base radius + margin).
ROBOT_RADIUS = 0.30
#: Radius of the base collision cylinder.
BASE_RADIUS = 0.28
#: Height of the four first-person cameras above the floor (Fetch's head camera with the torso down).
CAMERA_HEIGHT = 1.10
#: Downward tilt of the first-person cameras, radians (so table tops and counters are in view).
CAMERA_TILT = math.radians(15.0)
#: Vertical field of view of the first-person cameras, degrees (square images: also the horizontal one).
CAMERA_FOVY = 90.0
#: View name -> yaw of the camera relative to the base heading, in EMMOE's order.
VIEW_YAWS: dict[str, float] = {"front": 0.0, "left": math.pi / 2, "back": math.pi, "right": -math.pi / 2}
#: The head camera's view name (``robot/cam_head``): same field of view and image size as the four views.
HEAD_CAMERA = "head"
#: The torso lift's travel (m) and the head joints' limits (rad; head tilt positive looks down), as in the MJCF.
TORSO_RANGE = (0.0, 0.386)
HEAD_PAN_RANGE = (-1.57, 1.57)
HEAD_TILT_RANGE = (-0.76, 1.45)
#: Fetch's URDF velocity limits (torso 0.1 m/s; head 1.57 rad/s), for the simulated time a look takes.
TORSO_SPEED = 0.1
HEAD_SPEED = 1.57
#: Where the head pan and tilt axes and the head camera sit: the pan axis in the base frame with the torso down,
#: the tilt axis on the pan link, the camera on the tilt link (m; the bodies' ``pos`` in :func:`robot_mjcf`).
_HEAD_PAN_IN_BASE = (-0.07, 0.0, 0.97)
_HEAD_TILT_ON_PAN = (0.05, 0.0, 0.08)
_HEAD_CAMERA_ON_TILT = (0.05, 0.0, 0.05)

ARM_JOINTS: tuple[str, ...] = (
    "shoulder_pan",
    "shoulder_lift",
    "upperarm_roll",
    "elbow_flex",
    "forearm_roll",
    "wrist_flex",
    "wrist_roll",
)
FINGER_JOINTS: tuple[str, ...] = ("finger_left", "finger_right")
BASE_JOINTS: tuple[str, ...] = ("base_x", "base_y", "base_yaw")

#: Arm tucked over the base (Fetch's "tuck" idea: folded, gripper at about (0.14, 0, 0.43) m in the base
#: frame, inside the footprint and below the cameras' field of view). Found by a bounded least-squares
#: fit of the planar joints to that gripper position.
STOW_POSE: dict[str, float] = {
    "shoulder_pan": 0.0,
    "shoulder_lift": -0.417,
    "upperarm_roll": 0.0,
    "elbow_flex": 2.6,
    "forearm_roll": 0.0,
    "wrist_flex": 0.073,
    "wrist_roll": 0.0,
}
#: Carry pose: gripper pointing forward at about (0.49, 0, 0.91) m in the base frame, so a held object
#: shows at the bottom of the front view (same fit as the stow pose, elbow at its limit).
CARRY_POSE: dict[str, float] = {
    "shoulder_pan": 0.0,
    "shoulder_lift": 0.255,
    "upperarm_roll": 0.0,
    "elbow_flex": -2.6,
    "forearm_roll": 0.0,
    "wrist_flex": 2.16,
    "wrist_roll": 0.0,
}
#: Tuck pose of the physical skills: upper arm raised, forearm and wrist folded back, gripper at about
#: (0.24, 0, 0.79) m; every link within 0.33 m of the base's axis (the stow pose's elbow reaches 0.46 m forward
#: at counter height, inside a counter the base parks against). Found by a grid search over the three pitch
#: joints for the smallest reach, then backed off the joint limits.
TUCK_POSE: dict[str, float] = {
    "shoulder_pan": 0.0,
    "shoulder_lift": -1.15,
    "upperarm_roll": 0.0,
    "elbow_flex": -2.5,
    "forearm_roll": 0.0,
    "wrist_flex": -2.0,
    "wrist_roll": 0.0,
}
FINGER_OPEN = 0.045
#: Each finger's pad: its centre off the finger's slide axis and its half thickness (m). The pads' inner faces are
#: FINGER_PAD_GAP apart with the fingers closed, and 2 * FINGER_OPEN + FINGER_PAD_GAP apart open.
FINGER_PAD_OFFSET = 0.012
FINGER_PAD_HALF_THICKNESS = 0.007
FINGER_PAD_GAP = 2 * (FINGER_PAD_OFFSET - FINGER_PAD_HALF_THICKNESS)
ROBOT_PREFIX = "robot/"


def _camera_xyaxes(view_yaw: float) -> str:
    """MuJoCo ``xyaxes`` (camera x = image right, camera y = image up; it looks along -z)."""
    forward = np.array([math.cos(CAMERA_TILT), 0.0, -math.sin(CAMERA_TILT)])
    right = np.array([0.0, -1.0, 0.0])
    up = np.cross(right, forward)  # MuJoCo cameras look along their -z, so right x up = -forward
    c, s = math.cos(view_yaw), math.sin(view_yaw)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    x_axis, y_axis = rot @ right, rot @ up
    return " ".join(f"{v:.6f}" for v in (*x_axis, *y_axis))


def head_angles(base: tuple[float, float, float], torso: float, target: tuple[float, float, float]) -> tuple[float, float]:
    """Head pan and tilt (rad, within the joints' limits) that point the head camera's optical axis at ``target``
    (world frame) from a base at ``base`` = (x, y, yaw) with the torso lifted ``torso`` m: a point-head controller's
    job (Fetch's ``head_controller/point_head``). The pan turns about the pan axis; the tilt is solved for the camera,
    which sits ahead of and above the tilt axis, by a few fixed-point steps."""
    x, y, yaw = base
    c, s = math.cos(yaw), math.sin(yaw)
    dx, dy = target[0] - x, target[1] - y
    local = (c * dx + s * dy - _HEAD_PAN_IN_BASE[0], -s * dx + c * dy - _HEAD_PAN_IN_BASE[1])
    pan = min(max(math.atan2(local[1], local[0]), HEAD_PAN_RANGE[0]), HEAD_PAN_RANGE[1])
    # In the pan link's frame: forward distance and height of the target from the tilt axis.
    forward = math.cos(pan) * local[0] + math.sin(pan) * local[1] - _HEAD_TILT_ON_PAN[0]
    up = target[2] - (_HEAD_PAN_IN_BASE[2] + torso + _HEAD_TILT_ON_PAN[2])
    tilt = math.atan2(-up, forward)
    for _ in range(3):  # the camera's own offset on the tilt link moves with the tilt
        ox, oz = _HEAD_CAMERA_ON_TILT[0], _HEAD_CAMERA_ON_TILT[2]
        cam_f = math.cos(tilt) * ox + math.sin(tilt) * oz
        cam_u = -math.sin(tilt) * ox + math.cos(tilt) * oz
        tilt = math.atan2(-(up - cam_u), forward - cam_f)
    return pan, min(max(tilt, HEAD_TILT_RANGE[0]), HEAD_TILT_RANGE[1])


def robot_mjcf() -> tuple[str, str]:
    """The robot's ``<body>`` (for the worldbody) and its ``<actuator>`` children, as MJCF text.

    The base starts at the origin; the simulator writes the start pose into the base joints.
    """
    p = ROBOT_PREFIX
    hidden = 'group="3" contype="0" conaffinity="0"'
    dark, light, grey = "0.15 0.15 0.17 1", "0.85 0.85 0.82 1", "0.45 0.47 0.5 1"
    cams = "\n".join(
        f'<camera name="{p}cam_{name}" pos="0 0 0" xyaxes="{_camera_xyaxes(vy)}" fovy="{CAMERA_FOVY}"/>'
        for name, vy in VIEW_YAWS.items()
    )
    head_cam = (f'<camera name="{p}cam_{HEAD_CAMERA}" pos="{" ".join(map(str, _HEAD_CAMERA_ON_TILT))}" '
                f'xyaxes="0 -1 0 0 0 1" fovy="{CAMERA_FOVY}"/>')
    body = f"""
<body name="{p}base" pos="0 0 0">
  <joint name="{p}base_x" type="slide" axis="1 0 0" damping="50"/>
  <joint name="{p}base_y" type="slide" axis="0 1 0" damping="50"/>
  <joint name="{p}base_yaw" type="hinge" axis="0 0 1" damping="20"/>
  <geom name="{p}base_shell" type="cylinder" size="{BASE_RADIUS} 0.17" pos="0 0 0.20" rgba="{light}" mass="60"
        group="3" contype="0" conaffinity="1"/>
  <geom name="{p}base_bumper" type="cylinder" size="{BASE_RADIUS + 0.002} 0.02" pos="0 0 0.05" rgba="{dark}" mass="1" {hidden}/>
  <geom name="{p}torso_fixed" type="box" size="0.11 0.16 0.22" pos="-0.12 0 0.59" rgba="{light}" mass="10" {hidden}/>
  <body name="{p}camera_rig" pos="0 0 {CAMERA_HEIGHT}">
    {cams}
  </body>
  <body name="{p}torso_lift_link" pos="-0.12 0 0.37">
    <joint name="{p}torso_lift" type="slide" axis="0 0 1" range="{TORSO_RANGE[0]} {TORSO_RANGE[1]}" damping="100"/>
    <geom type="box" size="0.10 0.17 0.16" pos="0 0 0.32" rgba="{light}" mass="8" {hidden}/>
    <body name="{p}head_pan_link" pos="0.05 0 0.60">
      <joint name="{p}head_pan" type="hinge" axis="0 0 1" range="{HEAD_PAN_RANGE[0]} {HEAD_PAN_RANGE[1]}" damping="1"/>
      <inertial pos="0 0 0" mass="0.3" diaginertia="1e-3 1e-3 1e-3"/>
      <body name="{p}head_tilt_link" pos="{" ".join(map(str, _HEAD_TILT_ON_PAN))}">
        <joint name="{p}head_tilt" type="hinge" axis="0 1 0" range="{HEAD_TILT_RANGE[0]} {HEAD_TILT_RANGE[1]}" damping="1"/>
        <geom type="box" size="0.07 0.13 0.06" rgba="{grey}" mass="2" {hidden}/>
        {head_cam}
      </body>
    </body>
    <body name="{p}shoulder_pan_link" pos="0.15 0 0.36">
      <joint name="{p}shoulder_pan" type="hinge" axis="0 0 1" range="-1.6 1.6" damping="2"/>
      <geom type="cylinder" size="0.06 0.05" rgba="{grey}" mass="2" {hidden}/>
      <body name="{p}shoulder_lift_link" pos="0.12 0 0">
        <joint name="{p}shoulder_lift" type="hinge" axis="0 1 0" range="-1.22 1.52" damping="2"/>
        <geom type="capsule" fromto="0 0 0 0.13 0 0" size="0.055" rgba="{light}" mass="2" {hidden}/>
        <body name="{p}upperarm_roll_link" pos="0.13 0 0">
          <joint name="{p}upperarm_roll" type="hinge" axis="1 0 0" range="-3.14 3.14" damping="1"/>
          <geom type="capsule" fromto="0 0 0 0.22 0 0" size="0.05" rgba="{grey}" mass="1.5" {hidden}/>
          <body name="{p}elbow_flex_link" pos="0.22 0 0">
            <joint name="{p}elbow_flex" type="hinge" axis="0 1 0" range="-2.6 2.6" damping="1"/>
            <geom type="capsule" fromto="0 0 0 0.12 0 0" size="0.048" rgba="{light}" mass="1.5" {hidden}/>
            <body name="{p}forearm_roll_link" pos="0.12 0 0">
              <joint name="{p}forearm_roll" type="hinge" axis="1 0 0" range="-3.14 3.14" damping="1"/>
              <geom type="capsule" fromto="0 0 0 0.20 0 0" size="0.045" rgba="{grey}" mass="1.2" {hidden}/>
              <body name="{p}wrist_flex_link" pos="0.20 0 0">
                <joint name="{p}wrist_flex" type="hinge" axis="0 1 0" range="-2.16 2.16" damping="0.5"/>
                <geom type="capsule" fromto="0 0 0 0.06 0 0" size="0.04" rgba="{light}" mass="0.8" {hidden}/>
                <body name="{p}wrist_roll_link" pos="0.06 0 0">
                  <joint name="{p}wrist_roll" type="hinge" axis="1 0 0" range="-3.14 3.14" damping="0.5"/>
                  <inertial pos="0 0 0" mass="0.3" diaginertia="1e-3 1e-3 1e-3"/>
                  <body name="{p}gripper_link" pos="0.08 0 0">
                    <geom type="box" size="0.03 0.06 0.025" rgba="{dark}" mass="0.5" {hidden}/>
                    <site name="{p}grip" pos="0.09 0 0" size="0.01"/>
                    <body name="{p}finger_left_link" pos="0.07 0 0">
                      <joint name="{p}finger_left" type="slide" axis="0 1 0" range="0 {FINGER_OPEN}" damping="0.2"/>
                      <geom type="box" size="0.04 {FINGER_PAD_HALF_THICKNESS} 0.012" pos="0 {FINGER_PAD_OFFSET} 0" rgba="{dark}" mass="0.05"
                            group="1" contype="0" conaffinity="0"/>
                    </body>
                    <body name="{p}finger_right_link" pos="0.07 0 0">
                      <joint name="{p}finger_right" type="slide" axis="0 -1 0" range="0 {FINGER_OPEN}" damping="0.2"/>
                      <geom type="box" size="0.04 {FINGER_PAD_HALF_THICKNESS} 0.012" pos="0 -{FINGER_PAD_OFFSET} 0" rgba="{dark}" mass="0.05"
                            group="1" contype="0" conaffinity="0"/>
                    </body>
                  </body>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </body>
</body>
"""
    joints = BASE_JOINTS + ("torso_lift", "head_pan", "head_tilt") + ARM_JOINTS + FINGER_JOINTS
    gains = {"base_x": 2000, "base_y": 2000, "base_yaw": 500, "torso_lift": 5000}
    actuators = "\n".join(
        f'<position name="{p}act_{j}" joint="{p}{j}" kp="{gains.get(j, 100)}"/>' for j in joints
    )
    # Gravity compensation on everything above the base (real arms' controllers compensate gravity too): the
    # physical skills drive the arm with the position actuators below, which would otherwise sag under the
    # links' weight. The kinematic (oracle) skills never step the physics, so it changes nothing for them.
    for link in ("torso_lift_link", "head_pan_link", "head_tilt_link", "shoulder_pan_link", "shoulder_lift_link",
                 "upperarm_roll_link", "elbow_flex_link", "forearm_roll_link", "wrist_flex_link", "wrist_roll_link",
                 "gripper_link", "finger_left_link", "finger_right_link"):
        body = body.replace(f'<body name="{p}{link}"', f'<body name="{p}{link}" gravcomp="1"', 1)
    return body, actuators

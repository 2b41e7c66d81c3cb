"""The human partner's body for the embedded simulator: PARTNR's second agent (a humanoid in Habitat 3.0).

PARTNR ("PARTNR: A Benchmark for Planning and Reasoning in Embodied Multi-agent Tasks", §4 and appendix A.9)
pairs the robot with a simulated human who has the same skills plus the state-changing ones. Its oracle
skills snap the humanoid kinematically like the robot's; this module builds a body to match from primitives:

* a planar base (``base_x``, ``base_y``, ``base_yaw`` under the ``human/`` prefix), like the robot's, so the
  same path follower and collision check move it;
* one collision cylinder of radius :data:`HUMAN_BASE_RADIUS` (hidden group 3, ``contype=conaffinity=1``: it
  touches walls, furniture and the robot's base, and the robot's base touches it);
* a visible figure in geom group 4 (legs, trousers, shirt, arms, head with hair and a nose, in colours no
  furniture uses) so that it reads as a person in the robot's views and is not mistaken for either robot or
  furniture; the renderer hides group 4 in the human's own views (its cameras sit in its head) and shows the
  robot's group 3 there instead;
* four fixed eye-height cameras (``human/cam_front`` ...) with the robot's yaws, tilt and field of view, so
  the human's views have the same layout (front, left, back, right);
* a ``grip`` site in front of the chest where a held object is carried (the right forearm points at it).
"""

from __future__ import annotations

from homiebot.sim.mujoco.robot import CAMERA_FOVY, VIEW_YAWS, _camera_xyaxes

HUMAN_PREFIX = "human/"
#: Footprint radius used for planning and the human's ``WorldState.robot_radius`` (shoulder half-width + margin).
HUMAN_RADIUS = 0.27
#: Radius of the collision cylinder.
HUMAN_BASE_RADIUS = 0.25
#: Eye height of the human's cameras (an adult's eyes, about 1.6 m).
HUMAN_CAMERA_HEIGHT = 1.6
#: Geom group of the visible figure (hidden in the human's own views).
HUMAN_GROUP = 4
#: Geom group of the robot's body (robot.py): hidden in the robot's views, shown in the human's.
ROBOT_GROUP = 3
#: Where the hand carries an object, in the base frame (x forward, z up).
GRIP_POS = (0.38, -0.05, 1.0)
BASE_JOINTS: tuple[str, ...] = ("base_x", "base_y", "base_yaw")
SHIRT_RGBA = "0.85 0.25 0.55 1"  # magenta: no furniture or object colour in the scene library uses it
TROUSERS_RGBA = "0.18 0.2 0.38 1"
SKIN_RGBA = "0.87 0.68 0.55 1"
HAIR_RGBA = "0.22 0.14 0.08 1"


def human_mjcf() -> str:
    """The human's ``<body>`` for the worldbody, as MJCF text. The base starts at the origin; the simulator
    writes its pose into the base joints."""
    p = HUMAN_PREFIX
    visual = f'group="{HUMAN_GROUP}" contype="0" conaffinity="0"'
    cams = "\n".join(
        f'<camera name="{p}cam_{name}" pos="0 0 0" xyaxes="{_camera_xyaxes(vy)}" fovy="{CAMERA_FOVY}"/>'
        for name, vy in VIEW_YAWS.items()
    )
    gx, gy, gz = GRIP_POS
    return f"""
<body name="{p}base" pos="0 0 0">
  <joint name="{p}base_x" type="slide" axis="1 0 0" damping="50"/>
  <joint name="{p}base_y" type="slide" axis="0 1 0" damping="50"/>
  <joint name="{p}base_yaw" type="hinge" axis="0 0 1" damping="20"/>
  <geom name="{p}collision" type="cylinder" size="{HUMAN_BASE_RADIUS} 0.45" pos="0 0 0.5" rgba="0 0 0 0" mass="60"
        group="3" contype="1" conaffinity="1"/>
  <geom name="{p}leg_left" type="capsule" fromto="0 0.09 0.06 0 0.1 0.85" size="0.065" rgba="{TROUSERS_RGBA}" {visual}/>
  <geom name="{p}leg_right" type="capsule" fromto="0 -0.09 0.06 0 -0.1 0.85" size="0.065" rgba="{TROUSERS_RGBA}" {visual}/>
  <geom name="{p}shoe_left" type="box" size="0.12 0.05 0.035" pos="0.05 0.09 0.035" rgba="0.1 0.1 0.1 1" {visual}/>
  <geom name="{p}shoe_right" type="box" size="0.12 0.05 0.035" pos="0.05 -0.09 0.035" rgba="0.1 0.1 0.1 1" {visual}/>
  <geom name="{p}torso" type="capsule" fromto="0 0 0.92 0 0 1.32" size="0.17" rgba="{SHIRT_RGBA}" {visual}/>
  <geom name="{p}neck" type="capsule" fromto="0 0 1.42 0 0 1.5" size="0.05" rgba="{SKIN_RGBA}" {visual}/>
  <geom name="{p}head" type="sphere" size="0.11" pos="0 0 1.6" rgba="{SKIN_RGBA}" {visual}/>
  <geom name="{p}hair" type="sphere" size="0.112" pos="-0.02 0 1.63" rgba="{HAIR_RGBA}" {visual}/>
  <geom name="{p}nose" type="capsule" fromto="0.1 0 1.6 0.13 0 1.58" size="0.018" rgba="{SKIN_RGBA}" {visual}/>
  <geom name="{p}arm_left" type="capsule" fromto="0 0.22 1.38 0.02 0.25 0.9" size="0.045" rgba="{SHIRT_RGBA}" {visual}/>
  <geom name="{p}upperarm_right" type="capsule" fromto="0 -0.22 1.38 0.05 -0.24 1.1" size="0.045" rgba="{SHIRT_RGBA}" {visual}/>
  <geom name="{p}forearm_right" type="capsule" fromto="0.05 -0.24 1.1 {gx - 0.06} {gy - 0.04} {gz}" size="0.04" rgba="{SKIN_RGBA}" {visual}/>
  <site name="{p}grip" pos="{gx} {gy} {gz}" size="0.01"/>
  <body name="{p}camera_rig" pos="0.08 0 {HUMAN_CAMERA_HEIGHT}">
    {cams}
  </body>
</body>
"""

"""What a learned skill sees: the robot's head camera and a wrist camera, rendered small, at every control step.

A closed-loop policy (ACT, diffusion; trained on the physical skills' executions, homiebot/data/skill_datasets.py)
reads images of a few dozen pixels a side, many times a second. :class:`SkillCameras` renders them from the
simulator's MuJoCo data as it is mid-goal (the arm moving under physics), RGB only:

* ``head``: the robot's front first-person camera (``robot/cam_front``: head height, tilted down, 90 degrees), the
  same one the planner's front view comes from;
* ``wrist``: a camera rigidly mounted on the gripper (:data:`WRIST_MOUNT`: behind and above the palm, looking along
  the fingers and tilted down to them, the head camera's field of view). The robot model (homiebot/sim/mujoco/robot.py) has no camera on
  its arm, and one added to the MJCF would also become a link of the robot's URDF and a frame on ``/tf``; so the mount
  is this module's: the camera is placed at the gripper link's pose times the mount for each image. A real robot
  serving a policy trained on these images needs a camera at that mount.

The robot's body is hidden as in the first-person views (geom group 3), the fingers (group 1) and a held object show.
One offscreen GL context per instance; its images are at most the compiled model's offscreen buffer (the simulator's
view size, 256 by default).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from homiebot.gl_safety import guard_triton_after_gl
from homiebot.sim.mujoco import robot as robot_model
from homiebot.sim.mujoco.rendering import RendererUnavailable

#: The cameras, in the order a data set lists them.
CAMERAS: tuple[str, ...] = ("head", "wrist")
#: The first-person view the head camera is.
HEAD_VIEW = "front"
#: The wrist camera's pose in the gripper link's frame (x along the fingers, z up when the wrist is level): position
#: (m) and the downward tilt of its optical axis from the fingers' direction (rad). From there the open fingers' tips
#: are in the lower half of the image and what lies 10-40 cm beyond them fills the rest.
WRIST_MOUNT = ((-0.02, 0.0, 0.08), math.radians(30.0))
#: The wrist camera's near clipping plane (m): the fingers are 10 cm in front of it.
WRIST_NEAR = 0.01
#: The extents of an ``mjvGLCamera``'s frustum at its near plane (the far plane stays).
FRUSTUM = ("frustum_near", "frustum_center", "frustum_width", "frustum_bottom", "frustum_top")


class SkillCameras:
    """Renders :data:`CAMERAS` of one compiled scene as ``size`` x ``size`` RGB images (module docstring)."""

    def __init__(self, model: mujoco.MjModel, size: int) -> None:
        if size <= 0:
            raise ValueError(f"image size must be positive, not {size}")
        offscreen = min(model.vis.global_.offwidth, model.vis.global_.offheight)
        if size > offscreen:
            raise ValueError(f"image size {size} is larger than the model's offscreen buffer ({offscreen} pixels)")
        self.model = model
        self.size = size
        prefix = robot_model.ROBOT_PREFIX
        self._head = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, f"{prefix}cam_{HEAD_VIEW}")
        self._gripper = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, prefix + "gripper_link")
        if self._head < 0 or self._gripper < 0:
            raise ValueError("the model has no robot head camera or gripper link")
        try:
            self._gl = mujoco.GLContext(size, size)
            self._gl.make_current()
        except Exception as err:  # the GL backends raise assorted types; all mean the same to the user
            raise RendererUnavailable(f"cannot create an offscreen OpenGL context for the skill cameras: {err}") from err
        guard_triton_after_gl()
        self._context: mujoco.MjrContext | None = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        self._scene = mujoco.MjvScene(model, maxgeom=max(2000, 4 * model.ngeom))
        self._option = mujoco.MjvOption()  # groups 0-2 shown: the robot's body (3) hidden, the fingers (1) shown
        self._option.sitegroup[:] = 0  # sites are markers (the gripper's grip point), not things a camera sees
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._camera.fixedcamid = self._head
        self._rect = mujoco.MjrRect(0, 0, size, size)
        self._rgb = np.empty((size, size, 3), dtype=np.uint8)
        position, tilt = WRIST_MOUNT
        self._mount_pos = np.asarray(position, dtype=float)
        # The optical axis and the image's up in the gripper's frame.
        self._mount_forward = np.array([math.cos(tilt), 0.0, -math.sin(tilt)])
        self._mount_up = np.array([math.sin(tilt), 0.0, math.cos(tilt)])

    def wrist_pose(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The wrist camera's position, optical axis and image up in the world now."""
        rot = data.xmat[self._gripper].reshape(3, 3)
        return data.xpos[self._gripper] + rot @ self._mount_pos, rot @ self._mount_forward, rot @ self._mount_up

    def render(self, data: mujoco.MjData, names: tuple[str, ...] = CAMERAS) -> dict[str, np.ndarray]:
        """One image per camera of ``names`` (of :data:`CAMERAS`; ``size`` x ``size`` x 3, uint8) of ``data`` as it
        is."""
        assert self._context is not None, "closed"
        self._gl.make_current()
        scene = self._scene
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL, scene)
        headlights = [scene.lights[i] for i in range(scene.nlight) if scene.lights[i].headlight]
        # The head camera's frustum (mjv_updateScene set it up for the fixed camera): the wrist camera's has the same
        # field of view with a nearer clipping plane, so every extent scales with the near plane.
        head = scene.camera[0]
        scale = WRIST_NEAR / head.frustum_near
        frustum = {key: getattr(head, key) * scale for key in FRUSTUM}
        images: dict[str, np.ndarray] = {}
        unknown = set(names) - set(CAMERAS)
        if unknown:
            raise ValueError(f"no camera {sorted(unknown)}; the cameras are {CAMERAS}")
        for name in names:
            if name == "head":
                mujoco.mjv_updateCamera(self.model, data, self._camera, scene)
                pos = data.cam_xpos[self._head].copy()
                forward = -data.cam_xmat[self._head].reshape(3, 3)[:, 2]
            else:
                pos, forward, up = self.wrist_pose(data)
                for eye in (scene.camera[0], scene.camera[1]):  # both eyes: no stereo
                    eye.pos[:] = pos
                    eye.forward[:] = forward
                    eye.up[:] = up
                    for key, value in frustum.items():
                        setattr(eye, key, value)
            for light in headlights:  # the headlight follows each camera (rendering.py does the same per view)
                light.pos[:] = pos
                light.dir[:] = forward
            mujoco.mjr_render(self._rect, scene, self._context)
            mujoco.mjr_readPixels(self._rgb, None, self._rect, self._context)
            images[name] = self._rgb[::-1].copy()
        return images

    def close(self) -> None:
        if getattr(self, "_context", None) is not None:
            self._gl.make_current()
            assert self._context is not None
            self._context.free()
            self._context = None
        if getattr(self, "_gl", None) is not None:
            self._gl.free()
            self._gl = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown: GL may already be gone
            pass

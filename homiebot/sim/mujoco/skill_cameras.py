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

**The target marked** (``<camera>_marked``, :func:`marked`): the same camera's image with the skill's target object
tinted, so that a policy sees which of the objects in view to take (ACT takes no task text). Which pixels are the
target's comes from MuJoCo's own segmentation render of the same view (``mjRND_SEGMENT`` with ``mjRND_IDCOLOR``: one
more render pass; the segment colour names the scene geom, which names the model's geom): every pixel of a geom of the
target's body (:func:`target_geoms`) is blended :data:`MARK_ALPHA` of the way to :data:`MARK_RGB`. Where the target is
out of view or hidden behind something, nothing is marked, as a detector would find nothing. On a real robot the
perception stack's detection mask (or box) of the target in that camera's image supplies the same pixels.
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
#: A camera's name with the target marked in its image (module docstring, "The target marked").
MARK_SUFFIX = "_marked"
#: The colour the target's pixels are blended towards (magenta: rare among the scenes' objects and furniture), and how
#: far (0: not at all, 1: all the way).
MARK_RGB = (255, 0, 255)
MARK_ALPHA = 0.5
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


def marked(camera: str) -> str:
    """The name of ``camera``'s image with the target marked (``wrist`` -> ``wrist_marked``)."""
    return camera + MARK_SUFFIX


def unmarked(name: str) -> tuple[str, bool]:
    """The camera an image name is of, and whether the target is marked in it (``wrist_marked`` -> (wrist, True))."""
    if name.endswith(MARK_SUFFIX):
        return name[: -len(MARK_SUFFIX)], True
    return name, False


#: Every image name the skill cameras give: each camera, plain and marked.
IMAGE_NAMES: tuple[str, ...] = (*CAMERAS, *(marked(c) for c in CAMERAS))


def target_geoms(model: mujoco.MjModel, body: int) -> frozenset[int]:
    """The geoms of ``body`` and of every body below it: what the target object looks like to the camera."""
    inside = {body}
    for b in range(body + 1, model.nbody):  # MuJoCo numbers a body after its parent
        if int(model.body_parentid[b]) in inside:
            inside.add(b)
    return frozenset(int(g) for g in range(model.ngeom) if int(model.geom_bodyid[g]) in inside)


def object_geoms(model: mujoco.MjModel, name: str) -> frozenset[int]:
    """:func:`target_geoms` of the scene's object or piece of furniture ``name`` (its body ``object/<name>`` or
    ``furniture/<name>``, homiebot/sim/mujoco/compiler.py); ValueError when there is none."""
    for kind in ("object/", "furniture/"):
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, kind + name)
        if body >= 0:
            return target_geoms(model, body)
    raise ValueError(f"the scene has no object or furniture {name!r} to mark")


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
        self._ids = np.empty((size, size, 3), dtype=np.uint8)
        #: The target's pixels in each marked image of the last :meth:`render` (a visibility measure).
        self.target_pixels: dict[str, int] = {}
        position, tilt = WRIST_MOUNT
        self._mount_pos = np.asarray(position, dtype=float)
        # The optical axis and the image's up in the gripper's frame.
        self._mount_forward = np.array([math.cos(tilt), 0.0, -math.sin(tilt)])
        self._mount_up = np.array([math.sin(tilt), 0.0, math.cos(tilt)])

    def wrist_pose(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The wrist camera's position, optical axis and image up in the world now."""
        rot = data.xmat[self._gripper].reshape(3, 3)
        return data.xpos[self._gripper] + rot @ self._mount_pos, rot @ self._mount_forward, rot @ self._mount_up

    def render(self, data: mujoco.MjData, names: tuple[str, ...] = CAMERAS,
               target: frozenset[int] | None = None) -> dict[str, np.ndarray]:
        """One image per name of ``names`` (of :data:`IMAGE_NAMES`; ``size`` x ``size`` x 3, uint8) of ``data`` as it
        is. A marked name (``wrist_marked``) needs ``target``, the target's geoms (:func:`object_geoms`), and costs a
        segmentation pass of its camera (module docstring); a camera asked for plain and marked is rendered once."""
        assert self._context is not None, "closed"
        unknown = set(names) - set(IMAGE_NAMES)
        if unknown:
            raise ValueError(f"no camera {sorted(unknown)}; the cameras are {', '.join(IMAGE_NAMES)}")
        wanted = {unmarked(n) for n in names}
        if target is None and any(mark for _, mark in wanted):
            raise ValueError(f"{', '.join(n for n in names if unmarked(n)[1])}: a marked image needs the target's geoms")
        self._gl.make_current()
        scene = self._scene
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL, scene)
        headlights = [scene.lights[i] for i in range(scene.nlight) if scene.lights[i].headlight]
        # The head camera's frustum (mjv_updateScene set it up for the fixed camera): the wrist camera's has the same
        # field of view with a nearer clipping plane, so every extent scales with the near plane.
        head = scene.camera[0]
        scale = WRIST_NEAR / head.frustum_near
        frustum = {key: getattr(head, key) * scale for key in FRUSTUM}
        lut = self._target_lookup(target) if target is not None else None
        images: dict[str, np.ndarray] = {}
        self.target_pixels = {}
        for name in CAMERAS:
            plain, mark = (name, False) in wanted, (name, True) in wanted
            if not (plain or mark):
                continue
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
            rgb = self._rgb[::-1].copy()
            if plain:
                images[name] = rgb
            if mark:
                assert lut is not None
                mask = self._segment(lut)
                self.target_pixels[marked(name)] = int(mask.sum())
                tinted = rgb.copy()
                tinted[mask] = np.round(rgb[mask] * (1.0 - MARK_ALPHA)
                                        + np.asarray(MARK_RGB, dtype=float) * MARK_ALPHA).astype(np.uint8)
                images[marked(name)] = tinted
        return {n: images[n] for n in names}

    def _target_lookup(self, target: frozenset[int]) -> np.ndarray:
        """Segment colour (the scene geom's ``segid`` + 1; 0 the background) -> whether it is one of ``target``'s
        geoms, for the scene as ``mjv_updateScene`` last built it."""
        scene = self._scene
        lut = np.zeros(scene.ngeom + 2, dtype=bool)
        geom_type = mujoco.mjtObj.mjOBJ_GEOM
        for k in range(scene.ngeom):
            geom = scene.geoms[k]
            if geom.objtype == geom_type and geom.segid >= 0 and int(geom.objid) in target:
                lut[geom.segid + 1] = True
        return lut

    def _segment(self, lut: np.ndarray) -> np.ndarray:
        """The segmentation pass of the camera set up now: which pixels are the target's (``lut``:
        :meth:`_target_lookup`)."""
        flags = self._scene.flags
        flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 1
        flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 1
        try:
            mujoco.mjr_render(self._rect, self._scene, self._context)
            mujoco.mjr_readPixels(self._ids, None, self._rect, self._context)
        finally:
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 0
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 0
        ids = self._ids[::-1].astype(np.int32)
        segment = ids[..., 0] | (ids[..., 1] << 8) | (ids[..., 2] << 16)
        return np.asarray(lut[np.minimum(segment, lut.size - 1)])

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

"""Offscreen rendering of the four first-person views: RGB, metric depth and instance segmentation.

One GL context and one ``MjrContext`` per simulator, reused for every view and every observation. The
scene geometry is collected once per observation (``mjv_updateScene``); each view then only swaps the
camera (``mjv_updateCamera``) and draws twice: a normal pass for RGB, and a segmentation pass (flat id
colours) whose colour buffer gives the geom of each pixel and whose depth buffer gives metric depth
(MuJoCo's own renderer reads depth from the segmentation pass too: it is exact at far distances).
No shadows (``shadowsize=0``) and no multisampling (``offsamples=0``), both set by the compiler: they
cost most of the render time on a software GL and segmentation must not be anti-aliased anyway.

Conventions of :class:`homiebot.types.CameraView`:

* depth is the distance along the optical axis in metres; 0 where a ray hits nothing;
* segmentation holds scene instance ids (0 = nothing named: walls, ceiling, robot, background);
* ``camera_to_world`` is the optical frame (x right, y down, z forward): MuJoCo's camera frame
  (x right, y up, looking along -z) times ``diag(1, -1, -1)``;
* intrinsics for pixel coordinates whose integer values are pixel centres: ``cx = (W - 1) / 2``,
  ``cy = (H - 1) / 2``, ``fy = (H / 2) / tan(fovy / 2)``, ``fx = fy`` (square pixels).
"""

from __future__ import annotations

import math
import os

import mujoco
import numpy as np

from homiebot.gl_safety import guard_triton_after_gl
from homiebot.types import CameraView

_OPTICAL = np.diag([1.0, -1.0, -1.0])


class RendererUnavailable(RuntimeError):
    """Raised when no offscreen GL context can be created (a headless machine without EGL/OSMesa)."""


class MultiViewRenderer:
    """Renders named fixed cameras of one model into :class:`CameraView` objects."""

    def __init__(self, model: mujoco.MjModel, width: int, height: int, geom_instance: np.ndarray):
        self.model = model
        self.width = width
        self.height = height
        self.geom_instance = geom_instance
        try:
            self._gl = mujoco.GLContext(width, height)
            self._gl.make_current()
        except Exception as err:  # the GL backends raise assorted types; all mean the same to the user
            raise RendererUnavailable(
                f"cannot create an offscreen OpenGL context (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}): "
                f"{err}. Install the Debian packages libegl1 libopengl0 libgl1-mesa-dri and set MUJOCO_GL=egl "
                "(or libosmesa6 and MUJOCO_GL=osmesa), or create the simulator with render=False."
            ) from err
        guard_triton_after_gl()  # a model loaded later in this process must not import triton next to Mesa
        self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        # Read depth as 0 at the far plane (reversed Z), which the conversion below assumes.
        self._context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self._scene = mujoco.MjvScene(model, maxgeom=max(2000, 4 * model.ngeom))
        self._option = mujoco.MjvOption()  # default: geom groups 0-2 shown, the robot's group 3 hidden
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._rgb = np.empty((height, width, 3), dtype=np.uint8)
        self._ids = np.empty((height, width, 3), dtype=np.uint8)
        self._zbuf = np.empty((height, width), dtype=np.float32)
        extent = model.stat.extent
        near, far = np.float32(model.vis.map.znear * extent), np.float32(model.vis.map.zfar * extent)
        # MuJoCo renders with a reversed-Z projection; these invert it (same algebra as mujoco.Renderer).
        c = -(far + near) / (far - near)
        d = -(np.float32(2) * far * near) / (far - near)
        self._c_coef = float(np.float32(-0.5) * c - np.float32(0.5))
        self._d_coef = float(np.float32(-0.5) * d)
        fy = (height / 2) / math.tan(math.radians(model.cam_fovy[0]) / 2) if model.ncam else float(height)
        self.intrinsics = (fy, fy, (width - 1) / 2, (height - 1) / 2)

    def render(self, data: mujoco.MjData, cameras: dict[str, int],
               groups: dict[int, bool] | None = None) -> dict[str, CameraView]:
        """Render ``cameras``. ``groups``: geom groups to show (True) or hide (False) for these views, e.g.
        the robot's body (group 3) shown and the human's (group 4) hidden in the human's own views."""
        self._gl.make_current()
        for group, shown in (groups or {}).items():
            self._option.geomgroup[group] = 1 if shown else 0
        self._camera.fixedcamid = next(iter(cameras.values()))
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL, self._scene)
        lut = self._segment_lookup()
        # mjv_updateScene aims the headlight along the camera it was given; mjv_updateCamera does not move
        # it, so each view re-aims it (otherwise side views are lit from the front view's direction).
        headlights = [self._scene.lights[i] for i in range(self._scene.nlight) if self._scene.lights[i].headlight]
        fx, fy, cx, cy = self.intrinsics
        flags = self._scene.flags
        views: dict[str, CameraView] = {}
        for name, cam_id in cameras.items():
            self._camera.fixedcamid = cam_id
            mujoco.mjv_updateCamera(self.model, data, self._camera, self._scene)
            for light in headlights:
                light.pos[:] = data.cam_xpos[cam_id]
                light.dir[:] = -data.cam_xmat[cam_id].reshape(3, 3)[:, 2]
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 0
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 0
            mujoco.mjr_render(self._rect, self._scene, self._context)
            mujoco.mjr_readPixels(self._rgb, None, self._rect, self._context)
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 1
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 1
            mujoco.mjr_render(self._rect, self._scene, self._context)
            mujoco.mjr_readPixels(self._ids, self._zbuf, self._rect, self._context)
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 0
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 0
            ids = self._ids[::-1].astype(np.int32)
            segid = ids[..., 0] | (ids[..., 1] << 8) | (ids[..., 2] << 16)
            segid = np.minimum(segid, lut.size - 1)
            depth = (self._d_coef / (self._zbuf[::-1].astype(np.float64) + self._c_coef)).astype(np.float32)
            depth[segid == 0] = 0.0
            pose = np.eye(4)
            pose[:3, :3] = data.cam_xmat[cam_id].reshape(3, 3) @ _OPTICAL
            pose[:3, 3] = data.cam_xpos[cam_id]
            views[name] = CameraView(
                name=name,
                rgb=self._rgb[::-1].copy(),
                depth=depth,
                segmentation=lut[segid],
                fx=fx,
                fy=fy,
                cx=cx,
                cy=cy,
                camera_to_world=pose,
            )
        return views

    def render_rgb(self, data: mujoco.MjData, camera: mujoco.MjvCamera, name: str, size: tuple[int, int],
                   groups: dict[int, bool] | None = None) -> CameraView:
        """One RGB image (no segmentation pass, no depth) of ``camera``: a fixed camera of the model or a free one
        (``mjCAMERA_FREE``: look-at point, distance, azimuth, elevation), ``size`` = (width, height) at most this
        renderer's. ``groups`` are shown or hidden for this image only. Depth and segmentation are empty arrays;
        the intrinsics and the optical frame are the image's (module docstring)."""
        width, height = min(size[0], self.width), min(size[1], self.height)
        self._gl.make_current()
        saved = self._option.geomgroup.copy()
        try:
            for group, shown in (groups or {}).items():
                self._option.geomgroup[group] = 1 if shown else 0
            # One camera: mjv_updateScene aims the headlight along it.
            mujoco.mjv_updateScene(self.model, data, self._option, None, camera, mujoco.mjtCatBit.mjCAT_ALL, self._scene)
        finally:
            self._option.geomgroup[:] = saved
        rect = mujoco.MjrRect(0, 0, width, height)
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        mujoco.mjr_render(rect, self._scene, self._context)
        mujoco.mjr_readPixels(rgb, None, rect, self._context)
        gl_camera = self._scene.camera[0]
        forward, up = np.array(gl_camera.forward, dtype=float), np.array(gl_camera.up, dtype=float)
        pose = np.eye(4)
        pose[:3, :3] = np.column_stack([np.cross(forward, up), -up, forward])  # optical: x right, y down, z forward
        pose[:3, 3] = np.array(gl_camera.pos, dtype=float)
        if camera.type == mujoco.mjtCamera.mjCAMERA_FIXED:
            fovy = float(self.model.cam_fovy[camera.fixedcamid])
        else:
            fovy = float(self.model.vis.global_.fovy)
        f = (height / 2) / math.tan(math.radians(fovy) / 2)
        return CameraView(name=name, rgb=rgb[::-1].copy(), depth=np.zeros((0, 0), np.float32),
                          segmentation=np.zeros((0, 0), np.int32), fx=f, fy=f, cx=(width - 1) / 2,
                          cy=(height - 1) / 2, camera_to_world=pose)

    def _segment_lookup(self) -> np.ndarray:
        """Segmentation colour index (segid + 1; 0 = background) -> scene instance id."""
        lut = np.zeros(self._scene.ngeom + 2, dtype=np.int32)
        geom_type = mujoco.mjtObj.mjOBJ_GEOM
        for k in range(self._scene.ngeom):
            geom = self._scene.geoms[k]
            if geom.objtype == geom_type and geom.segid >= 0:
                lut[geom.segid + 1] = self.geom_instance[geom.objid]
        return lut

    def close(self) -> None:
        if getattr(self, "_context", None) is not None:
            self._gl.make_current()
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

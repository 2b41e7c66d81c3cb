"""The embedded MuJoCo backend: scene compiler, Fetch-class robot, renderer, navigation and oracle skills.

Importing this package selects EGL as MuJoCo's headless GL backend unless ``MUJOCO_GL`` is already set:
MuJoCo reads the variable once, when it is first imported, and its default (GLFW) needs a display, so
leaving it unset makes every render fail on a server. Users with a display or OSMesa set it themselves.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("MUJOCO_GL", "egl")
# MuJoCo's EGL backend imports PyOpenGL, which announces at INFO level that its optional C accelerator is
# missing; that is not news to users of the CLI (which logs at INFO).
logging.getLogger("OpenGL.acceleratesupport").setLevel(logging.WARNING)

__all__ = ["MujocoSimulator"]


def __getattr__(name: str):
    # Lazy: ``import homiebot.sim.mujoco`` must not pay for MuJoCo until the simulator is used.
    if name == "MujocoSimulator":
        from homiebot.sim.mujoco.backend import MujocoSimulator

        return MujocoSimulator
    raise AttributeError(name)

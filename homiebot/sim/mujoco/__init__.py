"""The embedded MuJoCo backend: scene compiler, Fetch-class robot, renderer, navigation and oracle skills.

Importing this package selects EGL as MuJoCo's headless GL backend unless ``MUJOCO_GL`` is already set:
MuJoCo reads the variable once, when it is first imported, and its default (GLFW) needs a display, so
leaving it unset makes every render fail on a server. Users with a display or OSMesa set it themselves.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

__all__ = ["MujocoSimulator"]


def __getattr__(name: str):
    # Lazy: ``import homiebot.sim.mujoco`` must not pay for MuJoCo until the simulator is used.
    if name == "MujocoSimulator":
        from homiebot.sim.mujoco.backend import MujocoSimulator

        return MujocoSimulator
    raise AttributeError(name)

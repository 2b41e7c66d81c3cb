"""The simulator the physical-skill tests act in: a fresh one per test (each resets its own task's scene)."""

from __future__ import annotations

import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()

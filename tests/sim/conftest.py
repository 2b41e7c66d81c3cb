"""Shared fixtures of the simulator tests: one renderer-backed and one headless simulator per module."""

from __future__ import annotations

import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(width=256, height=256, render=True)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def headless():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()

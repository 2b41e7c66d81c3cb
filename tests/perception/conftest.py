"""Fixtures for the perception tests that need the embedded simulator with rendering."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def sim():
    """A rendering MuJoCo simulator for the module (skipped where no OpenGL backend renders)."""
    from homiebot.sim.base import make_simulator
    from homiebot.sim.mujoco.rendering import RendererUnavailable

    try:
        simulator = make_simulator("mujoco")
    except RendererUnavailable as err:
        pytest.skip(str(err))
    yield simulator
    simulator.shutdown()

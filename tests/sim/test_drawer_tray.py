"""What lies in a drawer rests on the drawer's tray alone, and rides out with it.

The cabinet's floor under a drawer was level with the tray's floor (homiebot/sim/mujoco/compiler.py), so an object in
the drawer rested on both: pulled out by the arm, the tray slid under emmoe-021's bowl while the cabinet's floor held
it back by friction, until the tray's back wall pushed it; it ended 8 cm back on the tray against that wall and the
physical Pick reached it on no try (docs/results/physical-articulation-2026-11-30.md, "The drawer's bowl"). The
cabinet's floor now lies below the tray, as a drawer box runs on slides clear of its carcass.

Scenes: the library's apartments with objects in their closed kitchen drawer (4 and 7; 5's stands open), at seed 0.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.mujoco.physical import PhysicalDriver


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def _touching(model: mujoco.MjModel, data: mujoco.MjData, body: int) -> set[str]:
    touched = set()
    for i in range(data.ncon):
        b1, b2 = (int(model.geom_bodyid[g]) for g in (data.contact[i].geom1, data.contact[i].geom2))
        if body in (b1, b2):
            touched.add(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b2 if b1 == body else b1))
    return touched


@pytest.mark.parametrize("scene", ["apartment_4", "apartment_7"])
def test_what_lies_in_a_drawer_touches_the_tray_only_and_slides_out_with_it(sim, scene):
    sim.reset(scene, seed=0)
    inside = sorted(n for n, e in sim.state().entities.items() if e.parent == "kitchen_drawer")
    assert inside, f"nothing in {scene}'s kitchen drawer"
    driver = PhysicalDriver(sim)
    model, data = driver._bind()
    compiled, _ = sim.physics_handles()
    model.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_SLEEP)  # every contact computed, the resting ones too
    for _ in range(100):  # settle
        driver._step(model, data)
    bodies = {name: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"object/{name}") for name in inside}
    for name, body in bodies.items():
        touched = _touching(model, data, body) - {f"object/{other}" for other in inside}
        assert touched == {"kitchen_drawer/moving"}, (name, touched)
    # The tray driven out at up to 0.1 m/s for 3 s, 0.5 s to speed up and to slow down (its joint's speed set each
    # step, the test standing in for the arm): everything in it goes as far, to within 2 cm (a lemon rolls a little
    # on the tray as it speeds up, a bowl none).
    start = {name: data.xpos[body].copy() for name, body in bodies.items()}
    joint = compiled.articulation_qpos["kitchen_drawer"]
    closed = float(data.qpos[joint])
    dof = int(model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "kitchen_drawer/articulation")])
    steps = round(3.0 / model.opt.timestep)
    for k in range(steps):
        t = k * model.opt.timestep
        data.qvel[dof] = 0.1 * min(1.0, t / 0.5, (3.0 - t) / 0.5)
        driver._step(model, data)
    for _ in range(100):
        driver._step(model, data)
    slid = float(data.qpos[joint]) - closed
    assert slid > 0.2
    for name, body in bodies.items():
        moved = float(np.linalg.norm(data.xpos[body][:2] - start[name][:2]))
        assert abs(moved - slid) < 0.02, (name, moved, slid)

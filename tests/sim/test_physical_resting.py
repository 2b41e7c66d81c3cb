"""Under the physical skills' physics, an object that falls stays on the floor, and a round one that is nudged
stops rolling.

The rooms' floors were 2 cm slabs. MuJoCo separates two overlapping geoms along the shortest way out of their
overlap, and at 5 ms steps a can dropped from the tuck's height (1.1 m) sinks about 2.4 cm into the floor in one
step: past the middle of a 2 cm slab, so it was pushed out through the bottom and fell without end (EMMOE-100's
emmoe-081: green_can_2, knocked out of the hand above the base, was then reported 248 m below the floor).

MuJoCo's default contact has no rolling friction, so a ball rolls on for ever: emmoe-060's lemon, let go on the
fridge's floor and touched by the opening fingers, rolled out of the opened fridge and 1.6 m across the kitchen.

Scenes: emmoe-081 (green_can_2 dropped onto an open stretch of floor) and emmoe-060 (lemon_2 nudged on the floor),
each at its task seed.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.sim.mujoco.compiler import FLOOR_DEPTH
from homiebot.sim.mujoco.physical import PhysicalDriver, wake_all
from homiebot.tasks.suite import get_task


@pytest.fixture()
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


@pytest.mark.parametrize("height", [0.6, 1.14, 2.0])
def test_a_can_dropped_from_the_tuck_or_higher_comes_to_rest_on_the_floor(sim, height):
    task = get_task("emmoe-081")
    sim.reset(task.scene, seed=task.seed)
    driver = PhysicalDriver(sim)
    model, data = driver._bind()  # the physical skills' collision bits on this model
    compiled, _ = sim.physics_handles()
    adr = compiled.object_qpos["green_can_2"]
    data.qpos[adr : adr + 3] = (1.42, 4.27, height)  # open floor in the living room, nothing under it
    data.qpos[adr + 3 : adr + 7] = (1.0, 0.0, 0.0, 0.0)
    data.qvel[:] = 0.0
    mujoco.mj_forward(model, data)
    for _ in range(round(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    x, y, z = data.qpos[adr : adr + 3]
    # Lying or standing on the floor: its centre between its radius and its half height above z = 0, still.
    assert 0.02 < z < 0.1, f"the can's centre is at {z:.2f} m"
    assert np.hypot(x - 1.42, y - 4.27) < 0.5
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object/green_can_2")
    dof = model.jnt_dofadr[model.body_jntadr[body]]
    assert np.abs(data.qvel[dof : dof + 3]).max() < 0.05  # at rest


def test_half_the_floor_slab_exceeds_one_steps_sink_of_a_fall_from_the_ceiling():
    # A fall from a wall's height (2.5 m) reaches 7 m/s: 3.5 cm in one 5 ms step.
    assert FLOOR_DEPTH / 2 > (2 * 9.81 * 2.5) ** 0.5 * 0.005


def test_a_nudged_lemon_stops_rolling_within_a_hand_width(sim):
    task = get_task("emmoe-060")
    sim.reset(task.scene, seed=task.seed)
    model, data = PhysicalDriver(sim)._bind()
    compiled, _ = sim.physics_handles()
    adr = compiled.object_qpos["lemon_2"]
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object/lemon_2")
    dof = model.jnt_dofadr[model.body_jntadr[body]]
    data.qpos[adr : adr + 3] = (1.2, 6.5, 0.0275)  # on the kitchen's floor (a 5.5 cm ball)
    data.qpos[adr + 3 : adr + 7] = (1.0, 0.0, 0.0, 0.0)
    data.qvel[:] = 0.0
    data.qvel[dof : dof + 3] = (0.0, 0.2, 0.0)  # a nudge of 20 cm/s
    mujoco.mj_forward(model, data)
    for _ in range(round(3.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    # Without rolling resistance it still rolls at 14 cm/s after 3 s, 43 cm on.
    assert np.abs(data.qvel[dof : dof + 3]).max() < 0.01
    assert data.qpos[adr + 1] - 6.5 < 0.15


def _tree(model, name):
    return int(model.body_treeid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)])


def test_resting_objects_sleep_during_a_goal_and_everything_is_awake_after_it(sim):
    task = get_task("emmoe-081")
    sim.reset(task.scene, seed=task.seed)
    driver = PhysicalDriver(sim)
    model, data = driver._bind()
    assert model.opt.enableflags & mujoco.mjtEnableBit.mjENBL_SLEEP
    assert (data.tree_asleep < 0).all()  # nothing asleep yet
    for _ in range(100):
        driver._step(model, data)
    # The objects resting on furniture sleep; the robot (actuated) never does.
    assert data.ntree_awake < model.ntree / 2
    robot_tree = int(model.body_treeid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "robot/base")])
    assert data.tree_asleep[robot_tree] < 0
    driver._finish(0.0)
    # Sleeping is off between goals (the kinematic side computes every body) and every tree is awake.
    assert not model.opt.enableflags & mujoco.mjtEnableBit.mjENBL_SLEEP
    assert (data.tree_asleep < 0).all()


def test_a_falling_object_wakes_the_sleeping_one_it_lands_on(sim):
    task = get_task("emmoe-081")
    sim.reset(task.scene, seed=task.seed)
    driver = PhysicalDriver(sim)
    model, data = driver._bind()
    compiled, _ = sim.physics_handles()
    for _ in range(200):
        driver._step(model, data)
    below, above = compiled.object_qpos["red_box"], compiled.object_qpos["pear_1"]
    assert data.tree_asleep[_tree(model, "red_box")] >= 0, "the box on the counter did not fall asleep"
    resting = data.qpos[below : below + 3].copy()
    x, y, z = resting
    data.qpos[above : above + 7] = (x + 0.03, y, z + 0.3, 1.0, 0.0, 0.0, 0.0)  # dropped onto the box's edge
    driver._grasp.released_trees.add(_tree(model, "pear_1"))  # as a release marks it
    woken = False
    for _ in range(400):
        driver._step(model, data)
        woken = woken or data.tree_asleep[_tree(model, "red_box")] < 0
    assert woken, "the sleeping box slept through the impact"
    assert data.qpos[above + 2] < z + 0.2, "the dropped pear stayed in the air"


def test_waking_keeps_mujocos_sleep_arrays_consistent_when_an_object_lands_in_a_sleeping_drawer(sim):
    # emmoe-028: a sponge let go in the kitchen drawer stopped the step ("mj_nc: contact involves sleeping geom")
    # when waking wrote tree_asleep directly and left the arrays derived from it saying asleep.
    task = get_task("emmoe-028")
    sim.reset(task.scene, seed=task.seed)
    driver = PhysicalDriver(sim)
    model, data = driver._bind()
    compiled, _ = sim.physics_handles()
    for _ in range(200):
        driver._step(model, data)
    drawer = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "kitchen_drawer/moving")
    assert drawer >= 0 and data.tree_asleep[model.body_treeid[drawer]] >= 0, "the drawer did not fall asleep"
    wake_all(data)
    for _ in range(200):
        driver._step(model, data)  # everything still: asleep again
    adr = compiled.object_qpos["sponge"]
    x, y, z = data.xpos[drawer]
    data.qpos[adr : adr + 7] = (x, y, z + 0.15, 1.0, 0.0, 0.0, 0.0)  # above the tray
    driver._grasp.released_trees.add(_tree(model, "sponge"))
    for _ in range(300):
        driver._step(model, data)
        assert ((data.tree_asleep < 0) == (data.tree_awake == 1)).all()
    assert data.qpos[adr + 2] < z + 0.1, "the sponge did not fall into the drawer"


def test_what_the_held_object_presses_on_is_named_as_the_blocker(sim):
    # emmoe-024: the arm stopped short with the held box pressed on the drawer's front, reported as "unknown".
    task = get_task("emmoe-081")
    sim.reset(task.scene, seed=task.seed)
    support = sim.state().entities["green_can_1"].parent
    driver = PhysicalDriver(sim)
    model, data = driver._bind()
    driver._grasp._attach("green_can_1")  # held where it stands, on its support, the hand nowhere near
    mujoco.mj_forward(model, data)
    assert driver._arm_blocker(model, data) == f"{support}, touched by the held green_can_1"

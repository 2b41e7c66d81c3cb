"""MujocoSimulator.joint_positions(): the robot's joints above the base, as the model holds them now (the sim
bridge publishes them on /joint_states)."""

from __future__ import annotations

import mujoco
import pytest

from homiebot.sim.mujoco import robot
from homiebot.sim.mujoco.backend import MujocoSimulator

JOINTS = ["torso_lift", "head_pan", "head_tilt", *robot.ARM_JOINTS, *robot.FINGER_JOINTS]


def _arm(positions: dict[str, float]) -> dict[str, float]:
    return {joint: positions[joint] for joint in robot.ARM_JOINTS}


def test_before_any_scene_is_a_clear_error():
    fresh = MujocoSimulator(render=False)
    with pytest.raises(RuntimeError, match="no scene loaded"):
        fresh.joint_positions()


def test_names_order_and_the_stowed_arm_after_a_reset(headless):
    headless.reset("apartment_1", seed=0)
    positions = headless.joint_positions()
    assert list(positions) == JOINTS  # the base is the observation's robot_pose, not repeated here
    assert all(type(value) is float for value in positions.values())
    assert _arm(positions) == pytest.approx(robot.STOW_POSE)
    assert positions["finger_left"] == positions["finger_right"] == pytest.approx(robot.FINGER_OPEN)
    assert (positions["torso_lift"], positions["head_pan"], positions["head_tilt"]) == (0.0, 0.0, 0.0)


def test_follow_pick_arm_reset_put_and_ignore_failures(headless):
    headless.reset("apartment_1", seed=0)
    assert headless.go_to("brown_table").success
    stowed = headless.joint_positions()
    assert not headless.pick("fridge").success  # furniture: EXECUTION_FAILED, nothing moves
    assert headless.joint_positions() == stowed

    assert headless.pick("green_can").success
    carrying = headless.joint_positions()
    assert _arm(carrying) == pytest.approx(robot.CARRY_POSE)
    # The fingers close on the can (a 5.5 cm wide box): 2.75 cm half width less the 1.2 cm pad.
    assert carrying["finger_left"] == carrying["finger_right"] == pytest.approx(0.0275 - 0.012)

    headless.reset_arm()  # holding: back to the carry pose, the grasp kept
    assert headless.joint_positions() == carrying

    assert headless.go_to("kitchen_counter").success
    assert headless.put("green_can", "kitchen_counter").success
    assert headless.joint_positions() == stowed


def test_values_are_the_models_joint_positions(headless):
    """Read back from MjData: setting the model's joints by name is seen by joint_positions."""
    headless.reset("apartment_1", seed=0)
    model, data = headless._compiled.model, headless._data
    for i, joint in enumerate(JOINTS):
        adr = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, robot.ROBOT_PREFIX + joint)]
        data.qpos[adr] = 0.01 * (i + 1)
    assert headless.joint_positions() == pytest.approx({joint: 0.01 * (i + 1) for i, joint in enumerate(JOINTS)})

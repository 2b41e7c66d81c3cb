"""The object in the hand rides rigidly with the tool: the collision check's points of a held object are its box as
the gripper closed on it, carried with the tool, not the world graph's upright box seen from the tuck's tilted
tool. Before, a 21 cm box taken from above looked tilted by the tuck's tilt at a vertical release (emmoe-024, 027,
079: the Put into a drawer refused as "unreachable pose").

Scene: EMMOE-100's emmoe-024 (apartment_3, seed 1888): red_box_4, a 6 x 16 x 21 cm box upright on the kitchen
counter.
"""

from __future__ import annotations

import numpy as np
import pytest

from homiebot.skills.physical import PhysicalSkillSet
from homiebot.skills.physical.manipulation import tool_pose
from homiebot.tasks.suite import get_task
from homiebot.types import Action


def test_a_tall_box_picked_from_above_is_upright_again_when_the_tool_points_down(sim):
    task = get_task("emmoe-024")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    box = sim.state().entities["red_box_4"]
    height = box.bbox_max[2] - box.bbox_min[2]
    assert height > 0.2
    assert skills.run(Action.GO_TO, "oracle", "red_box_4").success
    picked = skills.run(Action.PICK, "oracle", "red_box_4")
    assert picked.success and "top-down" in picked.detail, picked.detail
    manipulation = skills.manipulation
    world = sim.state()
    assert world.held == "red_box_4"
    # In the tuck the tool is tilted far from straight down (the box with it).
    tuck = manipulation.kinematics.forward(manipulation._current())
    assert float(tuck[:3, 0] @ (0.0, 0.0, -1.0)) < 0.9
    points = manipulation._held_points(world)
    assert points is not None and points.shape == (27, 3)
    # With the tool straight down again, as at the grasp and at a release from above, the box stands upright: its
    # height is its own, its footprint its 6 x 16 cm (about the tool's axis, whichever way the hand turns).
    for hand in ((0.0, 1.0, 0.0), (1.0, 0.0, 0.0)):
        pose = tool_pose((0.6, 0.0, 0.9), (0.0, 0.0, -1.0), hand)
        placed = points @ pose[:3, :3].T + pose[:3, 3]
        assert np.ptp(placed[:, 2]) == pytest.approx(height, abs=0.01)
        assert sorted(np.ptp(placed[:, :2], axis=0)) == pytest.approx([0.06, 0.16], abs=0.01)


def _in_grip(sim, name: str) -> np.ndarray:
    """``name``'s orientation in the grip site's frame, from the simulator's data (a rotation matrix)."""
    import mujoco

    compiled, data = sim.physics_handles()
    body = mujoco.mj_name2id(compiled.model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)
    return data.site_xmat[compiled.grip_site].reshape(3, 3).T @ data.xmat[body].reshape(3, 3)


def test_the_held_box_keeps_its_pose_in_the_hand_from_goal_to_goal_and_goes_into_the_drawer(sim):
    # The grasp holds the object rigidly: the simulator writes it back after each goal as the hand holds it, tilted
    # with the tool in the tuck. Written back upright instead, the box was re-welded upright at the tuck and came
    # over the drawer 50 degrees from upright when the tool pointed down again, its corner on the drawer's front:
    # "the arm stopped while bringing red_box_4 over kitchen_drawer" on every try (emmoe-024, 027, 079).
    task = get_task("emmoe-024")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    at_grasp: list[np.ndarray] = []
    skills.driver.goal_observers.append(
        lambda event: at_grasp.append(_in_grip(sim, "red_box_4")) if event.closing else None)
    for action, target in ((Action.GO_TO, "kitchen_drawer"), (Action.OPEN, "kitchen_drawer"),
                           (Action.GO_TO, "red_box_4"), (Action.PICK, "red_box_4")):
        if action is Action.PICK:
            at_grasp.clear()  # the arm's Open closed the gripper on the drawer's handle
        result = skills.run(action, "oracle", target)
        assert result.success, (action, result.detail)
    assert len(at_grasp) == 1
    manipulation = skills.manipulation
    tuck = manipulation.kinematics.forward(manipulation._current())
    assert float(tuck[:3, 0] @ (0.0, 0.0, -1.0)) < 0.9  # the tuck tilts the tool, and the box with it
    np.testing.assert_allclose(_in_grip(sim, "red_box_4"), at_grasp[0], atol=0.05)
    assert skills.run(Action.GO_TO, "oracle", "kitchen_drawer").success
    np.testing.assert_allclose(_in_grip(sim, "red_box_4"), at_grasp[0], atol=0.05)
    put = skills.run(Action.PUT, "oracle", "red_box_4", "kitchen_drawer")
    assert put.success, put.detail
    box = sim.state().entities["red_box_4"]
    assert (box.relation, box.parent) == ("in", "kitchen_drawer")


def test_a_box_taken_at_a_slant_is_set_down_as_it_stood_and_stays_on_the_table(sim):
    # emmoe-056: red_box_2 (21 cm tall) is taken 60 degrees down. The hand holds it rigidly, so released from straight
    # above it came down tilted 30 degrees on a corner, 7 cm from the table's edge, and toppled off onto the floor
    # ("red_box_2 did not stay there", E2). The release that turns it back the way up it stood comes first.
    task = get_task("emmoe-056")
    sim.reset(task.scene, seed=task.seed)
    skills = PhysicalSkillSet(sim)
    assert skills.run(Action.GO_TO, "oracle", "red_box_2").success
    picked = skills.run(Action.PICK, "oracle", "red_box_2")
    assert picked.success and "degrees down" in picked.detail, picked.detail
    # The box's way up in the world at the end of each arm goal of the Put while the hand holds it.
    ups: list[float] = []
    skills.driver.goal_observers.append(
        lambda event: ups.append(_world_up(sim, "red_box_2")) if event.kind == "arm" and skills.driver.held else None)
    put = skills.run(Action.PUT, "oracle", "red_box_2", "brown_table")
    assert put.success, put.detail
    box = sim.state().entities["red_box_2"]
    assert (box.relation, box.parent) == ("on", "brown_table")
    # Brought over the table and lowered upright (within a few degrees), not tilted on a corner.
    assert len(ups) >= 2
    assert min(ups) > np.cos(np.radians(5.0)), np.degrees(np.arccos(ups))


def _world_up(sim, name: str) -> float:
    """The z component of ``name``'s own up axis in the world (1: upright), from the simulator's data."""
    import mujoco

    compiled, data = sim.physics_handles()
    body = mujoco.mj_name2id(compiled.model, mujoco.mjtObj.mjOBJ_BODY, "object/" + name)
    return float(data.xmat[body].reshape(3, 3)[2, 2])

"""The head camera's look into a container on arrival (homiebot/agent/looks.py, MujocoSimulator.look_at): the fixed
views' blind spot inside a sink's basin and a pulled-out drawer's tray, and the episode that needed it."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from homiebot.agent.looks import look_target
from homiebot.agent.loop import run_episode
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.planner.expert import ExpertPlanner
from homiebot.sim.mujoco import robot as robot_model
from homiebot.tasks.suite import get_task
from homiebot.types import Subtask

MIN_PIXELS = 12  # ConceptGraphConfig.min_pixels: what a segment needs to be detected


def _pixels(observation, name: str) -> int:
    instance = {n: i for i, n in observation.instance_names.items()}[name]
    return sum(int((view.segmentation == instance).sum()) for view in observation.views.values())


def _interior_centre(state, furniture: str) -> tuple[float, float, float]:
    target = look_target(Subtask("Go to", furniture), state)
    assert target is not None
    return target


def test_head_angles_point_the_head_camera_at_the_target(sim):
    sim.reset("apartment_4", seed=0)
    compiled, data = sim.physics_handles()
    model, q = compiled.model, compiled.robot_qpos
    camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "robot/cam_" + robot_model.HEAD_CAMERA)
    assert camera >= 0 and int(model.cam_bodyid[camera]) == mujoco.mj_name2id(
        model, mujoco.mjtObj.mjOBJ_BODY, "robot/head_tilt_link")  # on the head, not on the fixed rig
    robot = sim.state().robot
    saved = data.qpos.copy()
    try:
        for torso, (ahead, side, height) in [(0.386, (0.9, 0.0, 0.7)), (0.386, (0.6, 0.3, 0.5)), (0.0, (1.5, -0.4, 1.0)),
                                             (0.2, (0.7, 0.1, 0.1))]:
            c, s = math.cos(robot.yaw), math.sin(robot.yaw)
            target = np.array([robot.x + c * ahead - s * side, robot.y + s * ahead + c * side, height])
            pan, tilt = robot_model.head_angles((robot.x, robot.y, robot.yaw), torso, tuple(target))
            data.qpos[q["torso_lift"]], data.qpos[q["head_pan"]], data.qpos[q["head_tilt"]] = torso, pan, tilt
            mujoco.mj_kinematics(model, data)
            mujoco.mj_camlight(model, data)  # cameras are placed here, not by mj_kinematics
            axis = -data.cam_xmat[camera].reshape(3, 3)[:, 2]  # a MuJoCo camera looks along its -z
            towards = target - data.cam_xpos[camera]
            off = math.degrees(math.acos(float(np.dot(axis, towards) / np.linalg.norm(towards))))
            assert off < 0.5, (torso, ahead, side, height, off)
    finally:
        data.qpos[:] = saved
        mujoco.mj_kinematics(model, data)
        mujoco.mj_camlight(model, data)


@pytest.mark.parametrize("task_id, furniture, objects", [
    ("emmoe-049", "sink", ("bowl_1", "sponge")),  # in the basin, behind its front wall
    ("emmoe-091", "kitchen_drawer", ("bowl_2",)),  # in the pulled-out tray, behind its front panel
])
def test_a_look_into_the_container_shows_what_the_fixed_views_cannot(sim, task_id, furniture, objects):
    task = get_task(task_id)
    sim.reset(task.scene, seed=task.seed)
    assert sim.go_to(furniture).success
    if sim.state().entities[furniture].articulated:
        assert sim.open(furniture).success
    four = sim.observe()
    assert all(_pixels(four, name) == 0 for name in objects)  # the blind spot this look is for
    joints, clock = sim.joint_positions(), sim.sim_time
    state = sim.state()
    seen = sim.look_at(_interior_centre(state, furniture))
    assert seen is not None and list(seen.views) == [robot_model.HEAD_CAMERA]
    assert all(_pixels(seen, name) >= MIN_PIXELS for name in objects)
    height = seen.views[robot_model.HEAD_CAMERA].camera_to_world[2, 3]
    assert 1.40 < height < 1.55  # the torso was up (the head camera sits 1.10 m high with it down)
    assert sim.joint_positions() == joints  # torso and head back where they were
    assert sim.sim_time == pytest.approx(clock + 2 * robot_model.TORSO_RANGE[1] / robot_model.TORSO_SPEED)
    assert sim.state().robot == state.robot
    again = sim.observe()
    for view in four.views:
        np.testing.assert_array_equal(again.views[view].segmentation, four.views[view].segmentation)


def test_the_look_is_of_open_containers_from_the_map(sim):
    task = get_task("emmoe-091")
    sim.reset(task.scene, seed=task.seed)
    state = sim.state()
    sink = state.entities["sink"]
    target = look_target(Subtask("Go to", "sink"), state)
    assert target == pytest.approx(tuple((a + b) / 2 for a, b in zip(sink.interior_min, sink.interior_max, strict=True)))
    assert look_target(Subtask("Go to", "kitchen_drawer"), state) is None  # closed: nothing to see inside
    assert look_target(Subtask("Open", "sink"), state) is not None
    assert look_target(Subtask("Go to", "bowl_2"), state) is None  # an object, not a container
    assert look_target(Subtask("Go to", "kitchen"), state) is None
    assert look_target(Subtask("Pick", "sink"), state) is None
    assert look_target(Subtask("Go to", "brown_table"), state) is None  # no interior
    sim.go_to("kitchen_drawer")
    sim.open("kitchen_drawer")
    opened = sim.state()
    target = look_target(Subtask("Open", "kitchen_drawer"), opened)
    drawer = opened.entities["kitchen_drawer"]
    assert target is not None and drawer.interior_min[0] <= target[0] <= drawer.interior_max[0]
    assert drawer.interior_min != state.entities["kitchen_drawer"].interior_min  # the tray as it is now, pulled out


@pytest.mark.slow
def test_the_expert_through_perception_empties_the_sink_it_looked_into(sim):
    """emmoe-049 failed through perception from images (the expert went to the sink, saw nothing there, ended);
    with the look into the basin it succeeds, and the look is timed."""
    task = get_task("emmoe-049")

    def perception(spec, state):
        return WorldModel(spec, state, PerceptionConfig(builder="conceptgraph", semantic_grounding=False))

    trajectory = run_episode(sim, ExpertPlanner(), task=task, perception=perception)
    assert trajectory.error is None and trajectory.goal_satisfied
    looked = [r for r in trajectory.rounds if "look_s" in r.timings]
    assert looked and looked[0].subtask_text.startswith("[Go to, sink")

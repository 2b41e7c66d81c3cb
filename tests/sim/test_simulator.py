"""The embedded MuJoCo simulator: protocol, scripted sequence, every failure reason, determinism, views."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from homiebot.sim.base import Simulator, make_simulator
from homiebot.sim.mujoco.backend import MAX_REACH, MIN_REACH, MujocoSimulator
from homiebot.sim.scene import Pose, RobotSpec, SceneSpec, load_scene
from homiebot.types import VIEW_NAMES, EntityKind, SkillStatus

SCRIPT = [
    ("go_to", "fridge"),
    ("open", "fridge"),
    ("go_to", "kitchen_counter"),
    ("pick", "apple"),
    ("go_to", "fridge"),
    ("put", "apple", "fridge"),
    ("close", "fridge"),
]


def run_script(sim, steps=SCRIPT):
    return [getattr(sim, step[0])(*step[1:]) for step in steps]


def variant(**changes) -> SceneSpec:
    """apartment_1 with some top-level fields replaced (re-validated)."""
    data = load_scene("apartment_1").model_dump(by_alias=True)
    data.update(changes)
    return SceneSpec.model_validate(data)


def with_robot_at(x: float, y: float, yaw: float) -> SceneSpec:
    spec = load_scene("apartment_1")
    return spec.model_copy(update={"robot": RobotSpec(start=Pose(x=x, y=y, yaw=yaw))})


# ---------------------------------------------------------------------------------------------- protocol


def test_implements_the_simulator_protocol(sim):
    assert isinstance(sim, Simulator)
    assert sim.name == "mujoco"
    assert isinstance(make_simulator("mujoco", render=False), MujocoSimulator)


def test_state_lists_every_room_furniture_and_object(sim):
    sim.reset("apartment_1", seed=0)
    spec = sim.scene_spec()
    state = sim.state()
    assert set(state.entities) == set(spec.all_names())
    assert state.robot_room == "living_room"
    assert state.robot_radius == pytest.approx(0.30)
    fridge = state.entities["fridge"]
    assert fridge.kind is EntityKind.FURNITURE and fridge.articulated and fridge.interactive
    assert fridge.is_open is False and fridge.appliance and fridge.powered_on is True
    assert state.entities["kitchen_counter"].is_open is None
    assert state.entities["kitchen"].kind is EntityKind.ROOM
    apple = state.entities["apple"]
    assert (apple.parent, apple.relation, apple.room) == ("kitchen_counter", "on", "kitchen")
    assert state.entities["banana"].parent == "fridge" and state.entities["banana"].relation == "in"


# ---------------------------------------------------------------------------------------------- the script


def test_scripted_sequence_puts_the_apple_in_the_closed_fridge(sim):
    sim.reset("apartment_1", seed=0)
    results = run_script(sim)
    assert [r.status for r in results] == [SkillStatus.SUCCESS] * len(SCRIPT), [r.detail for r in results]
    assert results[0].path_length > 3.0  # living room to kitchen
    state = sim.state()
    apple = state.entities["apple"]
    assert (apple.parent, apple.relation, apple.held) == ("fridge", "in", False)
    assert state.entities["fridge"].is_open is False
    assert state.held is None
    # The apple lies inside the fridge's box.
    fridge = state.entities["fridge"]
    assert all(fridge.bbox_min[i] <= apple.position[i] <= fridge.bbox_max[i] for i in range(3))


def test_go_to_stops_facing_the_target_within_reach(sim):
    sim.reset("apartment_1", seed=0)
    spec = sim.scene_spec()
    for name in [f.name for f in spec.furniture] + [o.name for o in spec.objects]:
        result = sim.go_to(name)
        assert result.success, (name, result)
        state = sim.state()
        assert MIN_REACH <= state.reach_distance(name) < MAX_REACH, name
        parent = state.entities[name].parent
        if parent is not None:
            assert MIN_REACH <= state.reach_distance(parent) < MAX_REACH, (name, parent)
        e = state.entities[name]
        centre = ((e.bbox_min[0] + e.bbox_max[0]) / 2, (e.bbox_min[1] + e.bbox_max[1]) / 2)
        bearing = math.atan2(centre[1] - state.robot.y, centre[0] - state.robot.x)
        assert abs((bearing - state.robot.yaw + math.pi) % (2 * math.pi) - math.pi) < 1e-6, name


def test_go_to_articulated_furniture_stands_in_front(sim):
    sim.reset("apartment_1", seed=0)
    for name in ("fridge", "kitchen_drawer", "cabinet"):
        assert sim.go_to(name).success
        furniture = sim.scene_spec().furniture_by_name(name)
        local = np.array([sim.state().robot.x - furniture.pose.x, sim.state().robot.y - furniture.pose.y])
        c, s = math.cos(-furniture.pose.yaw), math.sin(-furniture.pose.yaw)
        local_y = s * local[0] + c * local[1]
        assert local_y < -furniture.size[1] / 2, name  # on the front (-y) side
        # Opening works from there, and a drawer does not hit the robot.
        assert sim.open(name).success
        assert sim.close(name).success


def test_go_to_room_ends_inside_it(sim):
    sim.reset("apartment_1", seed=0)
    result = sim.go_to("kitchen")
    assert result.success and result.path_length > 1.0
    assert sim.state().robot_room == "kitchen"
    again = sim.go_to("kitchen")
    assert again.success and again.path_length == 0.0


def test_path_is_collision_free_and_recorded(sim):
    from homiebot.sim.mujoco.geometry import furniture_rect, split_walls, wall_rect
    from homiebot.sim.mujoco.robot import BASE_RADIUS

    sim.reset("apartment_1", seed=0)
    result = sim.go_to("fridge")
    path = sim.travelled_path
    assert len(path) >= 2
    length = sum(math.dist(a, b) for a, b in itertools.pairwise(path))
    assert length == pytest.approx(result.path_length, rel=1e-6)
    # Independently of the planner's grid: every 2 cm of the path keeps the base off walls and furniture.
    spec = sim.scene_spec()
    rects = [furniture_rect(f) for f in spec.furniture]
    rects += [wall_rect(a, b, w.thickness) for w, a, b in split_walls(spec.walls, spec.doorways)]
    for (ax, ay), (bx, by) in itertools.pairwise(path):
        n = max(int(math.dist((ax, ay), (bx, by)) / 0.02), 1)
        points = np.array([(ax + (bx - ax) * k / n, ay + (by - ay) * k / n) for k in range(n + 1)])
        for rect in rects:
            assert not rect.contains(points, margin=BASE_RADIUS).any()


def test_held_object_moves_with_the_robot(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("kitchen_counter")
    assert sim.pick("apple").success
    assert sim.go_to("sofa").success
    state = sim.state()
    apple = state.entities["apple"]
    assert apple.held and apple.parent is None and state.held == "apple"
    assert math.hypot(apple.position[0] - state.robot.x, apple.position[1] - state.robot.y) < 0.6
    assert apple.room == "living_room"
    obs = sim.observe()
    assert obs.held_object == "apple"
    apple_id = next(i for i, n in obs.instance_names.items() if n == "apple")
    assert (obs.views["front"].segmentation == apple_id).any()  # a held object shows in the front view


def test_drawer_contents_ride_on_the_drawer(sim):
    sim.reset("apartment_1", seed=0)
    assert sim.go_to("kitchen_drawer").success
    assert sim.open("kitchen_drawer").success
    assert sim.state().entities["kitchen_drawer"].is_open
    assert sim.go_to("kitchen_counter").success
    assert sim.pick("short_can").success
    assert sim.go_to("kitchen_drawer").success
    assert sim.put("short_can", "kitchen_drawer").success
    open_y = sim.state().entities["short_can"].position[1]
    assert sim.close("kitchen_drawer").success
    can = sim.state().entities["short_can"]
    # The drawer faces north (yaw pi) and slides 0.4 m out: closing it moves the can 0.4 m south.
    assert open_y - can.position[1] == pytest.approx(0.4, abs=1e-6)
    assert (can.parent, can.relation) == ("kitchen_drawer", "in")


# ---------------------------------------------------------------------------------------------- failures


def test_not_found(sim):
    sim.reset("apartment_1", seed=0)
    for result in (sim.go_to("unicorn"), sim.pick("unicorn"), sim.open("unicorn"), sim.close("unicorn")):
        assert result.status is SkillStatus.NOT_FOUND and "unicorn" in result.detail
    sim.go_to("kitchen_counter")
    sim.pick("apple")
    assert sim.put("apple", "unicorn").status is SkillStatus.NOT_FOUND


def test_too_far(sim):
    sim.reset("apartment_1", seed=0)  # the robot starts in the living room
    result = sim.pick("apple")
    assert result.status is SkillStatus.TOO_FAR and "m away" in result.detail
    assert sim.open("fridge").status is SkillStatus.TOO_FAR


def test_too_close(sim):
    sim.reset(with_robot_at(0.6, 4.145 - 0.30 - 0.05, math.pi / 2), seed=0)  # 5 cm from the fridge door
    assert sim.state().reach_distance("fridge") < MIN_REACH
    result = sim.open("fridge")
    assert result.status is SkillStatus.TOO_CLOSE and "less than" in result.detail


def test_container_closed(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("fridge")
    assert sim.pick("banana").status is SkillStatus.CONTAINER_CLOSED  # banana is in the closed fridge
    sim.go_to("kitchen_counter")
    assert sim.pick("apple").success
    sim.go_to("fridge")
    result = sim.put("apple", "fridge")
    assert result.status is SkillStatus.CONTAINER_CLOSED and "closed" in result.detail
    assert sim.state().held == "apple"  # nothing happened


def test_not_interactive(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("kitchen_counter")
    assert sim.open("kitchen_counter").status is SkillStatus.NOT_INTERACTIVE  # no articulation
    assert sim.close("apple").status is SkillStatus.NOT_INTERACTIVE  # an object
    assert sim.open("kitchen").status is SkillStatus.NOT_INTERACTIVE  # a room
    # Articulated but marked non-interactive.
    spec = load_scene("apartment_1")
    furniture = [f.model_copy(update={"interactive": False}) if f.name == "cabinet" else f for f in spec.furniture]
    sim.reset(spec.model_copy(update={"furniture": furniture}), seed=0)
    sim.go_to("cabinet")
    result = sim.open("cabinet")
    assert result.status is SkillStatus.NOT_INTERACTIVE and "not interactive" in result.detail


def test_hand_full(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("kitchen_counter")
    assert sim.pick("apple").success
    assert sim.pick("short_can").status is SkillStatus.HAND_FULL
    sim.go_to("fridge")
    assert sim.open("fridge").status is SkillStatus.HAND_FULL  # EMMOE's L1 covers open/close too
    assert sim.close("fridge").status is SkillStatus.HAND_FULL


def test_hand_empty(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("kitchen_counter")
    result = sim.put("apple", "kitchen_counter")
    assert result.status is SkillStatus.HAND_EMPTY and result.detail == "the hand is empty"


def test_no_path(sim):
    sim.reset(variant(doorways=[]), seed=0)  # the kitchen is walled off from the living room
    result = sim.go_to("fridge")
    assert result.status is SkillStatus.NO_PATH and result.path_length == 0.0
    assert sim.go_to("kitchen").status is SkillStatus.NO_PATH
    assert sim.go_to("sofa").success  # same room: fine


def test_execution_failed_reasons(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("fridge")
    assert sim.pick("fridge").status is SkillStatus.NOT_INTERACTIVE  # furniture cannot be picked (L4)
    sim.go_to("kitchen_counter")
    sim.pick("apple")
    wrong = sim.put("short_can", "kitchen_counter")
    assert wrong.status is SkillStatus.EXECUTION_FAILED and "holds apple" in wrong.detail
    assert sim.put("apple", "kitchen").status is SkillStatus.EXECUTION_FAILED  # a room is no receptacle
    assert sim.state().held == "apple"


def test_no_free_spot_is_execution_failed(sim):
    # A counter whose usable area is smaller than the apple.
    spec = load_scene("apartment_1")
    from homiebot.sim.scene import SurfaceSpec

    furniture = [
        f.model_copy(update={"surfaces": [SurfaceSpec(name="top", height=0.45, min=(-0.01, -0.01), max=(0.01, 0.01))]})
        if f.name == "tv_stand"
        else f
        for f in spec.furniture
    ]
    objects = [o for o in spec.objects if o.name != "mug"]
    sim.reset(spec.model_copy(update={"furniture": furniture, "objects": objects}), seed=0)
    sim.go_to("brown_table")
    assert sim.pick("bowl").success
    sim.go_to("tv_stand")
    assert sim.put("bowl", "tv_stand").success  # the first fits (centred)
    sim.go_to("brown_table")
    assert sim.pick("green_can").success
    sim.go_to("tv_stand")
    result = sim.put("green_can", "tv_stand")
    assert result.status is SkillStatus.EXECUTION_FAILED and "no free spot" in result.detail


def test_failures_never_change_the_world(sim):
    sim.reset("apartment_1", seed=0)
    before = sim.state()
    for result in (sim.pick("apple"), sim.open("fridge"), sim.put("apple", "fridge"), sim.go_to("unicorn")):
        assert not result.success
    assert sim.state() == before


# ---------------------------------------------------------------------------------------------- determinism


def _trace(sim, seed):
    obs = sim.reset("apartment_1", seed=seed)
    results = run_script(sim)
    final = sim.observe()
    return obs, results, sim.state(), final


def test_same_seed_same_observations_and_outcomes(sim):
    first = _trace(sim, 7)
    other = MujocoSimulator()  # a fresh simulator with its own GL context
    try:
        second = _trace(other, 7)
    finally:
        other.shutdown()
    for obs_a, obs_b in ((first[0], second[0]), (first[3], second[3])):
        for name in VIEW_NAMES:
            a, b = obs_a.views[name], obs_b.views[name]
            assert np.array_equal(a.rgb, b.rgb)
            assert np.array_equal(a.depth, b.depth)
            assert np.array_equal(a.segmentation, b.segmentation)
            assert np.array_equal(a.camera_to_world, b.camera_to_world)
    assert first[1] == second[1]
    assert first[2] == second[2]


def test_different_seeds_move_placements(headless):
    positions = {}
    for seed in range(4):
        headless.reset("apartment_1", seed=seed)
        state = headless.state()
        positions[seed] = {n: e.position for n, e in state.entities.items() if e.kind is EntityKind.OBJECT}
    assert len({positions[s]["apple"] for s in positions}) == 4
    assert positions[0]["green_can"] != positions[1]["green_can"]


@pytest.mark.parametrize("seed", range(6))
def test_placements_are_on_their_receptacle_and_apart(headless, seed):
    headless.reset("apartment_1", seed=seed)
    state = headless.state()
    spec = headless.scene_spec()
    objects = [e for e in state.entities.values() if e.kind is EntityKind.OBJECT]
    for e in objects:
        parent = state.entities[e.parent]
        assert parent.bbox_min[0] <= e.position[0] <= parent.bbox_max[0]
        assert parent.bbox_min[1] <= e.position[1] <= parent.bbox_max[1]
        if e.relation == "on":
            furniture = spec.furniture_by_name(e.parent)
            assert e.bbox_min[2] == pytest.approx(furniture.surfaces[0].height)
    for i, a in enumerate(objects):
        for b in objects[i + 1 :]:
            if a.parent == b.parent:
                ra = (a.bbox_max[0] - a.bbox_min[0]) / 2
                rb = (b.bbox_max[0] - b.bbox_min[0]) / 2
                assert math.dist(a.position[:2], b.position[:2]) >= ra + rb, (a.name, b.name)


# ---------------------------------------------------------------------------------------------- views


def test_four_views_rgb_depth_segmentation(sim):
    obs = sim.reset("apartment_1", seed=0)
    assert list(obs.views) == list(VIEW_NAMES)
    ids = set(obs.instance_names) | {0}
    for view in obs.views.values():
        assert view.rgb.shape == (256, 256, 3) and view.rgb.dtype == np.uint8
        assert view.depth.shape == (256, 256) and view.depth.dtype == np.float32
        assert view.segmentation.shape == (256, 256) and view.segmentation.dtype == np.int32
        assert set(np.unique(view.segmentation)) <= ids
        assert 0.05 < float(np.median(view.depth)) < 15.0
        assert view.fx == view.fy == pytest.approx(128.0) and view.cx == pytest.approx(127.5)
        assert view.rgb.std() > 10  # not a blank image
    # The floor under the robot, at the bottom of every view, is the room the robot is in.
    room_id = next(i for i, n in obs.instance_names.items() if n == "living_room")
    for view in obs.views.values():
        assert view.segmentation[-1, 128] == room_id
    seen = {obs.instance_names[i] for v in obs.views.values() for i in np.unique(v.segmentation) if i}
    assert {"sofa", "brown_table", "tv_stand", "green_can", "kitchen"} <= seen


def test_depth_and_camera_pose_backproject_onto_the_right_instance(sim):
    obs = sim.reset("apartment_1", seed=0)
    state = sim.state()
    checked = 0
    for view in obs.views.values():
        rows, cols = np.nonzero(view.segmentation > 0)
        for r, c in list(zip(rows, cols))[:: max(len(rows) // 300, 1)]:
            name = obs.instance_names[int(view.segmentation[r, c])]
            entity = state.entities[name]
            z = float(view.depth[r, c])
            point = np.array([(c - view.cx) / view.fx * z, (r - view.cy) / view.fy * z, z, 1.0])
            world = view.camera_to_world @ point
            tol = 0.06
            assert all(entity.bbox_min[i] - tol <= world[i] <= entity.bbox_max[i] + tol for i in range(2)), name
            checked += 1
    assert checked > 500


def test_camera_frames_are_optical_and_turned(sim):
    obs = sim.reset("apartment_1", seed=0)
    yaw = obs.robot_pose.yaw
    for name, turn in zip(VIEW_NAMES, (0.0, math.pi / 2, math.pi, -math.pi / 2)):
        pose = obs.views[name].camera_to_world
        forward, down = pose[:3, 2], pose[:3, 1]
        assert math.atan2(forward[1], forward[0]) == pytest.approx(math.atan2(math.sin(yaw + turn), math.cos(yaw + turn)), abs=1e-6)
        assert forward[2] < 0 and down[2] < 0  # looking slightly down; image y points down
        assert pose[2, 3] == pytest.approx(1.10)


def test_headless_observe_returns_empty_views_and_same_state(sim, headless):
    sim.reset("apartment_1", seed=3)
    obs = headless.reset("apartment_1", seed=3)
    assert list(obs.views) == list(VIEW_NAMES)
    for view in obs.views.values():
        assert view.rgb.shape == (0, 0, 3) and view.depth.shape == (0, 0) and view.segmentation.shape == (0, 0)
        assert view.fx > 0
    assert [r for r in run_script(headless)] == [r for r in run_script(sim)]
    assert headless.state() == sim.state()
    np.testing.assert_allclose(
        headless.observe().views["left"].camera_to_world, sim.observe().views["left"].camera_to_world
    )


def test_topdown_map(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("fridge")
    image = sim.render_topdown(400)
    assert image.shape == (400, 400, 3) and image.dtype == np.uint8
    robot_blue = np.all(image == np.array([30, 144, 255]), axis=-1)
    path_orange = np.all(image == np.array([255, 140, 0]), axis=-1)
    assert robot_blue.sum() > 50 and path_orange.sum() > 50


def test_reset_arm_keeps_the_grasp(sim):
    sim.reset("apartment_1", seed=0)
    sim.go_to("kitchen_counter")
    sim.pick("apple")
    sim.reset_arm()
    assert sim.state().held == "apple"
    sim.put("apple", "kitchen_counter")
    sim.reset_arm()
    assert sim.state().held is None


def test_shutdown_then_reset_works_and_use_before_reset_is_a_clear_error():
    fresh = MujocoSimulator(render=False)
    with pytest.raises(RuntimeError, match="no scene loaded"):
        fresh.state()
    fresh.reset("apartment_1", seed=0)
    fresh.shutdown()
    with pytest.raises(RuntimeError, match="no scene loaded"):
        fresh.go_to("fridge")
    fresh.reset("apartment_1", seed=0)
    assert fresh.go_to("fridge").success
    fresh.shutdown()

"""The world as the skills read it through perception (WorldModel.perceived_state): objects where the views put
them, completed with their class's model, unseen objects absent, furniture from the map."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from homiebot.executor.executor import Executor
from homiebot.perception.world_model import PerceptionConfig, WorldModel
from homiebot.tasks.suite import get_task
from homiebot.types import EntityKind, Subtask

EXACT = {"semantic_grounding": False}


def test_seen_objects_come_from_their_nodes_and_unseen_ones_are_absent(sim):
    task = get_task("emmoe-040")  # apartment_5: apple_1 in the closed fridge, apple_2 on the tv stand
    sim.reset(task.scene, seed=task.seed)
    model = WorldModel(sim.scene_spec(), sim.state(), PerceptionConfig(builder="conceptgraph", **EXACT))
    model.observe(sim.observe(), sim.state())
    Executor(sim).execute_detailed(Subtask("Go to", "tv_stand"), "NoMaD", (), sim.state())
    model.observe(sim.observe(), sim.state())
    truth = sim.state()
    seen = model.perceived_state(truth)
    names = model.perceived_names(truth)

    assert "apple_2" in seen.entities and "apple_1" not in seen.entities  # in the closed fridge: never shown
    apple = seen.entities["apple_2"]
    # A round object: its class's model size, placed from its latest view (object_fit), its top at the seen top.
    diameter = sim.scene_spec().object_by_name("apple_2").size[0]
    assert apple.half_extents == (diameter / 2,) * 3 and apple.yaw is None
    # The views put it where it is, within a centimetre or so (the node's centroid, the near cap, was 2-3 cm off).
    assert math.dist(apple.position, truth.entities["apple_2"].position) < 0.02
    assert apple.position != truth.entities["apple_2"].position  # and it is perception's estimate, not the truth
    boxes = [n for n, e in seen.entities.items() if e.kind is EntityKind.OBJECT
             and sim.scene_spec().object_by_name(n).shape == "box"]
    assert boxes
    for name in boxes:  # a box: its model's size and a heading from its seen footprint
        got, true = seen.entities[name], truth.entities[name]
        assert got.half_extents is not None and got.yaw is not None
        assert sorted(got.half_extents) == pytest.approx(sorted(true.half_extents))
        assert math.dist(got.position[:2], true.position[:2]) < 0.03

    # Furniture is the map's (its box and interior), seen or not; the robot and the rooms unchanged.
    furniture = [n for n, e in truth.entities.items() if e.kind is EntityKind.FURNITURE]
    assert "tv_stand" in names  # seen ...
    assert all(seen.entities[n] == truth.entities[n] for n in furniture)  # ... and still the map's box
    assert seen.robot == truth.robot and seen.held == truth.held


def test_a_held_object_stays_known_though_no_view_shows_it(sim):
    task = get_task("emmoe-040")
    sim.reset(task.scene, seed=task.seed)
    model = WorldModel(sim.scene_spec(), sim.state(), PerceptionConfig(builder="conceptgraph", **EXACT))
    state = sim.state()
    held = "apple_1"
    holding = type(state)(robot=state.robot, robot_radius=state.robot_radius, held=held, entities=state.entities,
                          scene=state.scene, robot_room=state.robot_room)
    seen = model.perceived_state(holding)  # nothing observed yet: the hand still knows
    assert held in seen.entities
    assert not any(e.kind is EntityKind.OBJECT for n, e in seen.entities.items() if n != held)


def test_a_seen_box_is_completed_from_the_views_and_the_model_library_not_the_simulators_pose(sim):
    """The perceived box of an object depends on the views and its class's model only: the simulator's pose, size
    and heading of the object, replaced by nonsense in the state given, change nothing."""
    task = get_task("emmoe-040")
    sim.reset(task.scene, seed=task.seed)
    model = WorldModel(sim.scene_spec(), sim.state(), PerceptionConfig(builder="conceptgraph", **EXACT))
    Executor(sim).execute_detailed(Subtask("Go to", "tv_stand"), "NoMaD", (), sim.state())
    model.observe(sim.observe(), sim.state())
    truth = sim.state()
    seen = model.perceived_state(truth)
    boxes = [n for n, e in seen.entities.items() if e.kind is EntityKind.OBJECT and e.yaw is not None]
    assert boxes, "a box object in view"
    names = model.perceived_names(truth)  # the grounding (which node stands for which instance) is kept as it was
    model.perceived_names = lambda state: names  # type: ignore[method-assign]
    entities = dict(truth.entities)
    for name in boxes:
        entities[name] = replace(entities[name], position=(0.0, 0.0, 0.0), yaw=1.234, half_extents=(0.5, 0.5, 0.5),
                                 bbox_min=(-0.5, -0.5, -0.5), bbox_max=(0.5, 0.5, 0.5))
    garbled = model.perceived_state(replace(truth, entities=entities))
    for name in boxes:
        a, b = seen.entities[name], garbled.entities[name]
        assert (a.position, a.yaw, a.half_extents, a.bbox_min, a.bbox_max) == (
            b.position, b.yaw, b.half_extents, b.bbox_min, b.bbox_max)

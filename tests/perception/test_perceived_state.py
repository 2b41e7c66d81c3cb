"""The world as the skills read it through perception (WorldModel.perceived_state): objects where the views put
them, unseen objects absent, furniture from the map."""

from __future__ import annotations

import math

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
    node = model.graph.by_name(names["apple_2"])
    # A round object: the node's centre across, its model's size, its top at the seen top.
    assert apple.position[:2] == node.position[:2] and apple.bbox_max[2] == node.bbox_max[2]
    diameter = sim.scene_spec().object_by_name("apple_2").size[0]
    assert apple.half_extents == (diameter / 2,) * 3 and apple.yaw is None
    # The views put it where it is, within a few centimetres (the builder's mean error is about 2 cm).
    assert math.dist(apple.position, truth.entities["apple_2"].position) < 0.06
    assert apple.position != truth.entities["apple_2"].position  # and it is perception's estimate, not the truth
    boxes = [n for n, e in seen.entities.items() if e.kind is EntityKind.OBJECT
             and sim.scene_spec().object_by_name(n).shape == "box"]
    for name in boxes:  # anything not round keeps the seen box, without a heading
        node = model.graph.by_name(names[name])
        assert seen.entities[name].bbox_min == node.bbox_min and seen.entities[name].half_extents is None

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

"""World graph: hierarchy invariants, schema round trip, text description, targets, WorldState view."""

from __future__ import annotations

import json

import pytest

from homiebot.perception.actions import ActionUpdateError, apply_action, place_relation
from homiebot.perception.layout import CONTAINER, OPENABLE, SURFACE
from homiebot.perception.world_graph import (
    HOUSE_ID,
    ROBOT_ID,
    SCHEMA_VERSION,
    GraphNode,
    GraphSchemaError,
    NodeKind,
    Relation,
    WorldGraph,
    WorldGraphExport,
)
from homiebot.types import EntityKind, Pose2D


def small_graph() -> WorldGraph:
    g = WorldGraph("flat")
    g.add_node(GraphNode("kitchen", NodeKind.ROOM, "kitchen", "kitchen", ("cooking area",), (2, 2, 0), (0, 0, 0), (4, 4, 2.5)))
    g.add_node(GraphNode("living_room", NodeKind.ROOM, "living_room", "living_room", (), (6, 2, 0), (4, 0, 0), (8, 4, 2.5)))
    g.add_node(GraphNode("fridge", NodeKind.FURNITURE, "fridge", "fridge", ("refrigerator",), (0.5, 0.5, 0.9),
                         (0.2, 0.2, 0), (0.9, 0.9, 1.8), {"is_open": False}, (OPENABLE, CONTAINER)))
    g.add_node(GraphNode("counter", NodeKind.FURNITURE, "kitchen_counter", "counter", (), (2, 3.3, 0.45),
                         (1, 3, 0), (3, 3.6, 0.9), {}, (SURFACE,)))
    g.add_node(GraphNode("sofa", NodeKind.FURNITURE, "sofa", "sofa", ("couch",), (6, 3.5, 0.4), (5, 3, 0), (7, 4, 0.85)))
    g.set_room("fridge", "kitchen")
    g.set_room("counter", "kitchen")
    g.set_room("sofa", "living_room")
    g.add_node(GraphNode("apple", NodeKind.OBJECT, "apple", "apple", ("red_apple",), (2.4, 3.2, 0.94), (2.36, 3.16, 0.9), (2.44, 3.24, 0.98)))
    g.set_placement("apple", "counter", Relation.ON)
    g.set_room("apple", "kitchen")
    g.add_node(GraphNode(ROBOT_ID, NodeKind.AGENT, "robot", ROBOT_ID, position=(2.0, 2.0, 0.0)))
    g.set_room(ROBOT_ID, "kitchen")
    return g


def test_rooms_hang_off_the_house_and_placements_are_unique():
    g = small_graph()
    assert {n.id for n in g.children(HOUSE_ID, (Relation.PART_OF,))} == {"kitchen", "living_room"}
    assert g.placement("apple") == ("counter", Relation.ON)
    g.set_placement("apple", "fridge", Relation.IN)
    assert g.placement("apple") == ("fridge", Relation.IN)  # replaced, not added
    assert [e for e in g.edges() if e.source == "apple" and e.relation in (Relation.ON, Relation.IN)] == [
        next(e for e in g.edges() if e.source == "apple" and e.relation is Relation.IN)
    ]
    g.set_placement("apple", None, None)
    assert g.placement("apple") is None


def test_invalid_edges_are_refused_with_a_reason():
    g = small_graph()
    with pytest.raises(ValueError, match="only be held by an agent"):
        g.set_placement("apple", "counter", Relation.HELD_BY)
    with pytest.raises(ValueError, match="only be on furniture"):
        g.set_placement("apple", ROBOT_ID, Relation.ON)
    with pytest.raises(ValueError, match="not a room"):
        g.set_room("apple", "counter")
    with pytest.raises(ValueError, match="already has a node"):
        g.add_node(GraphNode("apple", NodeKind.OBJECT, "apple", "apple"))
    with pytest.raises(KeyError, match="no node 'ghost'"):
        g.node("ghost")
    with pytest.raises(ValueError, match="house root"):
        g.remove_node(HOUSE_ID)


def test_schema_round_trip_is_lossless(tmp_path):
    g = small_graph()
    apply_action(g, "Pick", "apple")
    data = json.loads(g.to_json())
    assert data["schema_version"] == SCHEMA_VERSION
    back = WorldGraph.from_json(g.to_json())
    assert back.to_dict() == g.to_dict()
    path = g.save(tmp_path / "g" / "graph.json")
    assert WorldGraph.load(path).to_dict() == g.to_dict()
    assert [p.name for p in path.parent.iterdir()] == ["graph.json"]  # no temporary left behind
    export = g.to_export()
    assert isinstance(export, WorldGraphExport)
    node = next(n for n in export.nodes if n.id == "apple")
    assert (node.kind, node.category, node.aliases, node.states["held"]) == ("object", "apple", ["red_apple"], True)
    assert {(e.source, e.target, e.relation) for e in export.edges} >= {("apple", ROBOT_ID, "held_by"), ("kitchen", HOUSE_ID, "part_of")}


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("schema_version"), "missing 'schema_version'"),
        (lambda d: d.update(schema_version=SCHEMA_VERSION + 1), "not supported"),
        (lambda d: d["nodes"][0].pop("category"), "nodes.0.category"),
        (lambda d: d["nodes"][0].update(position=[1, 2]), "nodes.0.position"),
        (lambda d: d["edges"].append({"source": "apple", "target": "nowhere", "relation": "on"}), "no node 'nowhere'"),
        (lambda d: d["edges"].append({"source": "apple", "target": "sofa", "relation": "under"}), "'under'"),
    ],
)
def test_bad_documents_are_refused_with_the_field(mutate, message):
    data = small_graph().to_dict()
    mutate(data)
    with pytest.raises(GraphSchemaError, match=message):
        WorldGraph.from_dict(data)


def test_bad_files(tmp_path):
    with pytest.raises(GraphSchemaError, match="not found"):
        WorldGraph.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(GraphSchemaError, match="bad.json.*not valid JSON"):
        WorldGraph.load(bad)


def test_text_description_lists_rooms_furniture_objects_and_the_hand():
    g = small_graph()
    text = g.describe()
    assert text.splitlines() == [
        "Furniture:",
        "kitchen: counter, fridge (closed)",
        "living_room: sofa",
        "Objects:",
        "apple: on counter",
        "Robot: in kitchen, hands empty",
    ]
    apply_action(g, "Pick", "apple")
    assert "apple: held by robot" in g.describe()
    assert g.describe().endswith("Robot: in kitchen, holding apple")
    apply_action(g, "Open", "fridge")
    apply_action(g, "Put", "apple", "fridge")
    assert "apple: in fridge" in g.describe() and "fridge (open)" in g.describe()
    g.remove_node("apple")
    assert "No objects found yet" in g.describe()


def test_observed_targets_are_rooms_furniture_and_objects():
    assert small_graph().observed_targets() == ("apple", "counter", "fridge", "kitchen", "living_room", "sofa")


def test_world_state_view_keys_by_name_and_carries_placement():
    g = small_graph()
    state = g.as_world_state()
    assert state.robot == Pose2D(2.0, 2.0, 0.0)
    assert state.entities["apple"].parent == "counter" and state.entities["apple"].relation == "on"
    assert state.entities["fridge"].is_open is False and state.entities["fridge"].articulated
    assert state.entities["kitchen"].kind is EntityKind.ROOM and state.robot_room == "kitchen"
    apply_action(g, "Pick", "apple")
    state = g.as_world_state()
    assert state.held == "apple" and state.entities["apple"].held and state.entities["apple"].parent is None


def test_action_updates_follow_partnr():
    g = small_graph()
    assert apply_action(g, "Go to", "sofa") == []
    apply_action(g, "Pick", "apple")
    assert g.placement("apple") == (ROBOT_ID, Relation.HELD_BY)
    assert g.node("apple").states["held"] is True
    apply_action(g, "Put", "apple", "counter")
    assert g.placement("apple") == ("counter", Relation.ON)
    assert g.node("apple").position == (2.0, 3.3, 0.9)  # top centre until seen again
    assert g.node("apple").states["held"] is False
    apply_action(g, "Close", "fridge")
    assert g.node("fridge").states["is_open"] is False
    with pytest.raises(ActionUpdateError, match="cannot pick furniture"):
        apply_action(g, "Pick", "fridge")
    with pytest.raises(ActionUpdateError, match="not in the world graph"):
        apply_action(g, "Pick", "spaceship")
    with pytest.raises(ActionUpdateError, match="cannot open object"):
        apply_action(g, "Open", "apple")
    with pytest.raises(ActionUpdateError, match="Put needs a place"):
        apply_action(g, "Put", "apple")


def test_the_box_follows_the_object_through_pick_and_put():
    """The box moves with the position, its size kept: a stale box where the object was taken from stood for it in
    the skills' world (a sponge put in a sink kept its box on the table, and the next Put released onto it)."""
    g = small_graph()
    size = [b - a for a, b in zip(g.node("apple").bbox_min, g.node("apple").bbox_max, strict=True)]

    def box():
        node = g.node("apple")
        return [pytest.approx(v) for v in (*node.bbox_min, *node.bbox_max)]

    apply_action(g, "Pick", "apple")  # centred on the robot at (2, 2, 0)
    assert box() == [2.0 - size[0] / 2, 2.0 - size[1] / 2, -size[2] / 2, 2.0 + size[0] / 2, 2.0 + size[1] / 2, size[2] / 2]
    apply_action(g, "Put", "apple", "sofa")  # on: standing on the middle of the sofa's top (6, 3.5, 0.85)
    assert box() == [6.0 - size[0] / 2, 3.5 - size[1] / 2, 0.85, 6.0 + size[0] / 2, 3.5 + size[1] / 2, 0.85 + size[2]]
    apply_action(g, "Pick", "apple")
    apply_action(g, "Open", "fridge")
    apply_action(g, "Put", "apple", "fridge")  # in: the middle of the fridge's box (0.55, 0.55, 0.9)
    assert box() == [0.55 - size[0] / 2, 0.55 - size[1] / 2, 0.9 - size[2] / 2, 0.55 + size[0] / 2, 0.55 + size[1] / 2,
                     0.9 + size[2] / 2]


def test_a_put_places_the_object_where_the_hand_let_go_when_the_skill_knows():
    g = small_graph()
    size = [b - a for a, b in zip(g.node("apple").bbox_min, g.node("apple").bbox_max, strict=True)]
    apply_action(g, "Pick", "apple")
    apply_action(g, "Put", "apple", "sofa", released_at=(5.3, 3.2, 0.9))  # near the sofa's end, not its middle
    node = g.node("apple")
    assert g.placement("apple") == ("sofa", Relation.ON) and node.position == (5.3, 3.2, 0.9)
    assert [pytest.approx(v) for v in (*node.bbox_min, *node.bbox_max)] == [
        5.3 - size[0] / 2, 3.2 - size[1] / 2, 0.9 - size[2] / 2, 5.3 + size[0] / 2, 3.2 + size[1] / 2, 0.9 + size[2] / 2]


@pytest.mark.parametrize(
    "affordances, is_open, expected",
    [
        ((OPENABLE, CONTAINER), False, Relation.IN),  # fridge: no top to put on
        ((SURFACE,), None, Relation.ON),  # table
        ((OPENABLE, CONTAINER, SURFACE), False, Relation.ON),  # closed drawer unit with a top
        ((OPENABLE, CONTAINER, SURFACE), True, Relation.IN),  # opened to put inside
        ((CONTAINER,), None, Relation.IN),  # sink basin
        ((), True, Relation.IN),  # image-built furniture the robot opened
        ((), None, Relation.ON),  # image-built furniture
    ],
)
def test_put_relation(affordances, is_open, expected):
    states = {} if is_open is None else {"is_open": is_open}
    node = GraphNode("f", NodeKind.FURNITURE, "f", "f", states=states, affordances=affordances)
    assert place_relation(node) is expected

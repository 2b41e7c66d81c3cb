"""The text mode's world description of the current state: furniture open or closed, what lies on or in each piece
(both relations kept apart, an object inside an object nested), the floor, the held object left to the Inventory,
and the names within reach by the expert's rule (a Go to stretches it to 2 m for its own target)."""

from __future__ import annotations

from homiebot.planner.reach import ReachRule
from homiebot.planner.text_planning import describe_world
from homiebot.types import EntityKind, EntityState, Pose2D, Subtask, WorldState


def _entity(name: str, kind: EntityKind, x: float, room: str | None = "kitchen", **fields) -> EntityState:
    return EntityState(name=name, category=name, kind=kind, aliases=(), position=(x, 0.0, 0.5),
                       bbox_min=(x - 0.2, -0.2, 0.0), bbox_max=(x + 0.2, 0.2, 1.0), room=room, **fields)


def _state() -> WorldState:
    room, furniture, obj = EntityKind.ROOM, EntityKind.FURNITURE, EntityKind.OBJECT
    entities = [
        _entity("kitchen", room, 0.0, room=None),
        _entity("hallway", room, 9.0, room=None),
        _entity("cabinet", furniture, 0.8, articulated=True, interactive=True, is_open=True),
        _entity("counter", furniture, 2.4),
        _entity("cup", obj, 0.8, parent="cabinet", relation="in"),
        _entity("plate", obj, 0.8, parent="cabinet", relation="on"),
        _entity("bowl", obj, 2.4, parent="counter", relation="on"),
        _entity("apple", obj, 2.4, parent="bowl", relation="in"),
        _entity("sock", obj, 5.0),  # on the floor
        _entity("can", obj, 0.0, parent=None, held=True),
    ]
    return WorldState(robot=Pose2D(0.0, 0.0, 0.0), robot_radius=0.3, held="can",
                      entities={e.name: e for e in entities}, robot_room="kitchen")


def test_the_world_now_in_one_line_per_room():
    text = describe_world(_state(), None)
    assert text.splitlines() == [
        "World now:",
        "kitchen: cabinet (open) [in: cup; on: plate], counter [on: bowl [in: apple]], floor [on: sock]",
        "hallway: nothing",
        "Robot: in kitchen; within reach: cabinet, cup, plate",
    ]
    assert "can" not in text.replace("cabinet", "")  # held: the Inventory line names it


def test_a_go_to_puts_its_target_within_reach_up_to_two_metres():
    state = _state()
    rule = ReachRule()
    assert state.reach_distance("counter") > rule.interact_m  # 1.9 m: not within reach from here
    assert not rule.reachable(state, "counter", None)
    assert rule.reachable(state, "counter", Subtask("Go to", "counter"))
    assert not rule.reachable(state, "counter", Subtask("Go to", "bowl"))  # only the Go to's own target
    assert describe_world(state, Subtask("Go to", "counter")).endswith("within reach: cabinet, counter, cup, plate")

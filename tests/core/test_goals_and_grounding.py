"""Goal evaluation and alias grounding on hand-built world states (no simulator)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from homiebot.perception.grounding import AliasGrounder, normalize_name
from homiebot.tasks.goals import GoalSpec, goal_satisfied, unmet_conditions
from homiebot.types import EntityKind, EntityState, Pose2D, WorldState


def _ent(name, category, kind=EntityKind.OBJECT, pos=(0.0, 0.0, 0.5), parent=None, relation=None, aliases=(), **kw):
    lo = tuple(p - 0.05 for p in pos)
    hi = tuple(p + 0.05 for p in pos)
    return EntityState(name, category, kind, tuple(aliases), pos, lo, hi, parent=parent, relation=relation, **kw)


def _state(*entities, robot=(0.0, 0.0), held=None, room=None):
    return WorldState(Pose2D(robot[0], robot[1], 0.0), 0.3, held, {e.name: e for e in entities}, "test", room)


FRIDGE = _ent("fridge", "refrigerator", EntityKind.FURNITURE, aliases=("fridge", "refrigerator"), articulated=True, interactive=True, is_open=False)
TABLE = _ent("brown_table", "table", EntityKind.FURNITURE, pos=(3.0, 0.0, 0.4), aliases=("table", "brown table"))


def test_placed_count_all_and_from():
    start = _state(FRIDGE, TABLE, _ent("apple_1", "apple", parent="brown_table", relation="on"),
                   _ent("banana", "banana", parent="brown_table", relation="on"), _ent("mug", "mug", parent="brown_table", relation="on"))
    end = _state(FRIDGE, TABLE, _ent("apple_1", "apple", parent="fridge", relation="in"),
                 _ent("banana", "banana", parent="brown_table", relation="on"), _ent("mug", "mug", parent="brown_table", relation="on"))
    one_apple = GoalSpec.model_validate({"all": [{"type": "placed", "category": "apple", "relation": "in", "receptacle": "fridge"}]})
    assert goal_satisfied(one_apple, start, end)
    all_fruit = GoalSpec.model_validate({"all": [{"type": "placed", "category": "fruit", "from": "brown_table", "all": True, "relation": "in", "receptacle": "fridge"}]})
    assert not goal_satisfied(all_fruit, start, end)
    assert len(unmet_conditions(all_fruit, start, end)) == 1
    cleared_but_mug = GoalSpec.model_validate({"all": [{"type": "cleared", "receptacle": "brown_table", "except": ["mug", "banana"]}]})
    assert goal_satisfied(cleared_but_mug, start, end)


def test_count_articulation_inspected_robot_in():
    room = _ent("second_floor", "landing", EntityKind.ROOM, aliases=("second floor",))
    s0 = _state(FRIDGE, room, _ent("red_box_1", "cracker_box", parent="fridge", relation="in"))
    s1 = _state(FRIDGE, room, _ent("red_box_1", "cracker_box", parent="fridge", relation="in"), room="second_floor")
    goal = GoalSpec.model_validate({"all": [
        {"type": "count", "category": "red_box", "relation": "in", "receptacle": "fridge", "equals": 0},
    ]})
    assert goal_satisfied(goal, s0, s1)  # red_box is no alias of this cracker box: it selects nothing
    goal = GoalSpec.model_validate({"all": [
        {"type": "count", "category": "cracker_box", "relation": "in", "receptacle": "fridge", "equals": 1},
        {"type": "articulation", "furniture": "fridge", "state": "closed"},
        {"type": "inspected", "furniture": "fridge"},
        {"type": "robot_in", "room": "second floor"},
    ]})
    assert not goal_satisfied(goal, s0, s1)
    assert goal_satisfied(goal, s0, s1, opened={"fridge"})


def test_goal_schema_rejects_bad_conditions():
    with pytest.raises(ValidationError):
        GoalSpec.model_validate({"all": [{"type": "teleport", "where": "moon"}]})
    with pytest.raises(ValidationError):
        GoalSpec.model_validate({"all": [{"type": "placed", "relation": "in", "receptacle": "fridge"}]})
    with pytest.raises(ValidationError):
        GoalSpec.model_validate({"all": []})


def test_normalize_name():
    assert normalize_name("The Kitchen Counter") == "kitchen_counter"
    assert normalize_name("  a red-can ") == "red_can"
    assert normalize_name("") == ""


def test_alias_grounder_exact_alias_nearest_and_unknown():
    near = _ent("apple_1", "apple", pos=(1.0, 0.0, 0.5), aliases=("apple", "red_apple"))
    far = _ent("apple_2", "apple", pos=(5.0, 0.0, 0.5), aliases=("apple", "red_apple"))
    state = _state(FRIDGE, near, far, robot=(0.0, 0.0))
    g = AliasGrounder()
    assert g.ground("apple_2", state).instance == "apple_2"
    result = g.ground("red apple", state)
    assert result.instance == "apple_1" and result.candidates == ("apple_1", "apple_2")
    assert g.ground("the Refrigerator", state).instance == "fridge"
    assert g.ground("spaceship", state).instance is None
    assert g.ground("   ", state).instance is None
    assert AliasGrounder().ground("red apple", _state(FRIDGE, near, far, robot=(6.0, 0.0))).instance == "apple_2"


def test_reach_distance_surface_to_surface():
    state = _state(TABLE, robot=(0.0, 0.0))
    # table footprint starts at x=2.95; base radius 0.3 -> gap 2.65
    assert state.reach_distance("brown_table") == pytest.approx(2.65)
    assert _state(TABLE, robot=(2.7, 0.0)).reach_distance("brown_table") == 0.0

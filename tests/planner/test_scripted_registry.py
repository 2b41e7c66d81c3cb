"""ScriptedPlanner (replay, script files, exhaustion) and the planner registry (names, options, free text)."""

from __future__ import annotations

import json

import pytest

from homiebot.planner.base import PlanRequest
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.registry import (
    PlannerError,
    available_planners,
    free_text_planners,
    make_planner,
    planner_class,
)
from homiebot.planner.scripted import END_ANSWER, ScriptedPlanner, ScriptExhausted, load_script


def req(i: int = 1) -> PlanRequest:
    return PlanRequest(system_prompt="", instruction="", images=[], round_index=i)


def test_replays_in_order_then_ends():
    p = ScriptedPlanner(["a", "b"])
    assert [p.plan(req()), p.plan(req()), p.plan(req())] == ["a", "b", END_ANSWER]
    p.reset("t")
    assert p.plan(req()) == "a" and len(p.requests) == 1


def test_exhaustion_can_be_an_error():
    p = ScriptedPlanner([], on_exhausted="error")
    with pytest.raises(ScriptExhausted):
        p.plan(req())


def test_script_files(tmp_path):
    text = tmp_path / "s.txt"
    text.write_text("Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD\n---\n\nAnalysis: b\nSubtask: [End]\nModel: None\n")
    assert load_script(text) == ["Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD", "Analysis: b\nSubtask: [End]\nModel: None"]
    js = tmp_path / "s.json"
    js.write_text(json.dumps(["x", "y"]))
    assert ScriptedPlanner(path=js).outputs == ["x", "y"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": 1}))
    with pytest.raises(ValueError, match="list of strings"):
        load_script(bad)
    with pytest.raises(FileNotFoundError):
        load_script(tmp_path / "missing.txt")


def test_registry_names_and_classes():
    assert {"expert", "scripted"} <= set(available_planners())
    assert planner_class("expert") is ExpertPlanner
    assert isinstance(make_planner("expert"), ExpertPlanner)
    assert "expert" not in free_text_planners() and "scripted" in free_text_planners()


def test_unknown_planner_lists_the_known_ones():
    with pytest.raises(PlannerError, match=r"unknown planner 'gpt9'; available: .*expert.*scripted"):
        make_planner("gpt9")


def test_options_are_checked_against_the_configuration(tmp_path):
    with pytest.raises(PlannerError, match=r"planner 'expert' does not take option\(s\) base_url; it takes: interact_range_m"):
        make_planner("expert", base_url="http://x")
    # None values (CLI flags not given) are dropped.
    assert isinstance(make_planner("expert", base_url=None, model=None), ExpertPlanner)
    assert make_planner("expert", interact_range_m=1.5).interact_range_m == 1.5
    with pytest.raises(PlannerError, match="planner 'expert': need 0 <= near_threshold_m"):
        make_planner("expert", interact_range_m=5.0)
    with pytest.raises(PlannerError, match="script file not found"):
        make_planner("scripted", path=str(tmp_path / "nope.txt"))

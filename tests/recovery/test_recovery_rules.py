"""The rule-based stage answers (CMFR appendix J's preconditions on EMMOE's error codes), alone and inside the
wrapper's control flow."""

from __future__ import annotations

import json

import pytest
from recovery_helpers import Driver, answer

from homiebot.recovery.rules import parse_subtask, preconditions, rule_answer
from homiebot.types import ErrorCode, Subtask

EMPTY = "Unable to put, the hand is empty"
FAR = "Unable to pick, the target is far away"


@pytest.mark.parametrize(("subtask", "code", "steps"), [
    ("[Pick, bowl]", "D1", ["[Go to, bowl]"]),
    ("[Put, cup, table]", "D1", ["[Go to, table]"]),  # placing: the place is what must be near
    ("[Put, cup, table]", "L2", ["[Go to, cup]", "[Pick, cup]"]),
    ("[Put, cup, fridge]", "L3", ["[Open, fridge]"]),
    ("[Pick, cup]", "L1", []),  # where to put the held object is a choice: no rule
    ("[Pick, cup]", "E1", []),
    ("[Open, wall]", "L4", []),
    ("[Pick, cup]", "XX", []),  # not an EMMOE code
    ("not a step", "D1", []),
])
def test_stage2_rules_follow_the_report(subtask, code, steps):
    data = json.loads(rule_answer("preconditions", subtask, code))
    assert data["steps"] == steps and data["missing"] is bool(steps)


def test_a_pick_inside_a_closed_receptacle_opens_it_first():
    from recovery_helpers import kitchen_state

    state = kitchen_state()  # the apple is in the closed fridge, the cup on the table
    assert json.loads(rule_answer("preconditions", "[Pick, apple]", "E1", state))["steps"] == ["[Open, fridge]"]
    assert json.loads(rule_answer("preconditions", "[Pick, apple]", "D1", state))["steps"] == ["[Go to, apple]"]
    assert json.loads(rule_answer("preconditions", "[Pick, cup]", "E1", state))["steps"] == []
    assert json.loads(rule_answer("preconditions", "[Pick, apple]", "E1"))["steps"] == []  # no state, no rule


def test_the_other_stages_answer_nothing_and_stage1_keeps_the_step():
    assert json.loads(rule_answer("importance"))["important"] is True
    for kind in ("workaround", "post_execution", "search"):
        assert json.loads(rule_answer(kind, "[Pick, cup]", "D1"))["steps"] == []
    assert json.loads(rule_answer("cot", "[Pick, cup]", "D1"))["action"] == "skip"
    assert json.loads(rule_answer("locations")) == {"locations": []}


def test_subtask_text_round_trips():
    for subtask in (Subtask("Go to", "kitchen"), Subtask("Put", "cup", "table"), Subtask("End")):
        assert parse_subtask(subtask.text()) == subtask
    assert preconditions(Subtask("Put", "cup", None), ErrorCode.D1) == ["[Go to, cup]"]


def test_the_wrapper_with_rules_inserts_the_precondition_and_retries_without_a_model():
    d = Driver([answer("[Put, cup, table]"), answer("[Pick, bowl]")], [], rules=True)
    assert d.step() == "[Put, cup, table]"
    assert d.step(EMPTY) == "[Go to, cup]"  # stage 1 keeps it, stage 2's rule: get the cup first
    assert d.step() == "[Pick, cup]"
    assert d.step() == "[Put, cup, table]"  # the retry
    assert d.step() == "[Pick, bowl]"  # the retry worked: the base planner goes on
    assert d.step(FAR) == "[Go to, bowl]"
    s = d.planner.stats
    assert s.reached == {"1": 2, "2": 2, "3": 0, "4": 0} and s.stage2_success == 1 and s.llm_calls == 0
    assert d.llm.prompts == []  # no model was asked
    assert [(c["stage"], c["subtask"], c["rules"]) for c in s.calls][:2] == [
        ("importance", "[Put, cup, table]", True), ("preconditions", "[Put, cup, table]", True)]

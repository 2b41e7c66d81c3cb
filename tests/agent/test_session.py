"""PlannerSession: instructions, history string, inventory, window, format errors, End, round limit."""

from __future__ import annotations

import numpy as np
import pytest

from homiebot.agent.session import FORMAT_ERROR_MESSAGE, PlannerSession, SessionFinished
from homiebot.planner.prompt import system_prompt
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.types import ErrorCode, Feedback, Pose2D, WorldState

TASK = "put the green_can on the brown_table to the fridge"


def ok(inv=()):
    return Feedback(ErrorCode.OK, "None", tuple(inv))


def answer(subtask: str, model: str = "NoMaD") -> str:
    return f"Analysis: because.\nSubtask: {subtask}\nModel: {model}"


def test_first_instruction_is_appendix_D_with_None_history():
    s = PlannerSession(TASK, ScriptedPlanner([]))
    req = s.make_request([np.zeros((4, 4, 3), np.uint8)] * 4)
    assert req.instruction == (
        f"Task: {TASK}\nInventory: None\nHistorical Execution: None\nFeedback: None\n"
        "Now based on the instruction above, please output Analysis, Subtask and Model in mentioned format.\n"
    )
    assert req.system_prompt == system_prompt()
    assert req.round_index == 1 and req.history == ()


def test_history_inventory_and_feedback_follow_the_rounds():
    s = PlannerSession(TASK, ScriptedPlanner([]))
    s.make_request([])
    s.record(s.parse(answer("[Go to, green_can]", "PixNav")), ok())
    s.make_request([])
    s.record(s.parse(answer("[Pick, green_can]", "RT-1-X")), ok(["green_can"]))
    s.make_request([])
    out = s.parse(answer("[Put, green_can, fridge]", "RT-1-X"))
    s.record(out, Feedback(ErrorCode.L3, "Unable to put, the fridge is closed, you should open it first", ("green_can",)))
    req = s.make_request([])
    assert s.historical_execution == (
        "(1) Go to, green_can(success) (2) Pick, green_can(success) (3) Put, green_can, fridge(fail) "
    )
    assert req.instruction.startswith(
        f"Task: {TASK}\nInventory: green_can\nHistorical Execution: (1) Go to, green_can(success) "
        "(2) Pick, green_can(success) (3) Put, green_can, fridge(fail) \n"
        "Feedback: Unable to put, the fridge is closed, you should open it first\n"
    )
    assert req.inventory == ("green_can",) and req.round_index == 4
    assert [t.answer for t in req.history] == [answer("[Go to, green_can]", "PixNav"), answer("[Pick, green_can]", "RT-1-X"), out.raw]


def test_window_of_three_rounds():
    s = PlannerSession(TASK, ScriptedPlanner([]))
    for i in range(5):
        s.make_request([])
        s.record(s.parse(answer(f"[Go to, place{i}]")), ok())
    req = s.make_request([])
    assert len(req.history) == 3
    assert "place2" in req.history[0].answer and "place4" in req.history[-1].answer


def test_unparseable_output_becomes_F1_feedback_and_loop_goes_on():
    s = PlannerSession(TASK, ScriptedPlanner([]))
    s.make_request([])
    out = s.parse("I think I will go to the fridge.")
    assert out.subtask is None
    fb = s.format_feedback(out)
    assert fb.code is ErrorCode.F1 and fb.message == FORMAT_ERROR_MESSAGE
    s.record(out, fb)
    req = s.make_request([])
    assert "Historical Execution: (1) invalid output(fail) \n" in req.instruction
    assert f"Feedback: {FORMAT_ERROR_MESSAGE}\n" in req.instruction
    assert not s.done


def test_end_detected_on_parsed_action_not_substring():
    s = PlannerSession(TASK, ScriptedPlanner([]))
    s.make_request([])
    s.record(s.parse(answer("[Pick, blender]", "RT-1-X")), ok(["blender"]))
    assert not s.ended  # the paper's `"end" in subtask.lower()` would stop here
    s.make_request([])
    s.record(s.parse(answer("[End]", "None")), s.end_feedback())
    assert s.ended and s.done
    assert s.historical_execution.endswith("(2) End(success) ")
    with pytest.raises(SessionFinished):
        s.make_request([])


def test_twenty_round_limit():
    s = PlannerSession(TASK, ScriptedPlanner([]))
    n = 0
    while not s.done:
        s.make_request([])
        s.record(s.parse(answer("[Go to, fridge]")), ok())
        n += 1
    assert n == 20 and not s.ended


def test_privileged_fields_reach_only_privileged_planners():
    from homiebot.planner.expert import ExpertPlanner

    state = WorldState(robot=Pose2D(0, 0, 0), robot_radius=0.3, held=None)
    plain = PlannerSession(TASK, ScriptedPlanner([])).make_request([], world_state=state, goal="g")
    assert plain.world_state is None and plain.goal is None
    expert = PlannerSession(TASK, ExpertPlanner()).make_request([], world_state=state, goal="g")
    assert expert.world_state is state and expert.goal == "g"


def test_configured_lists_reach_prompt_and_request():
    s = PlannerSession(TASK, ScriptedPlanner([]), models=("NoMaD", "M3"), model_descriptions={"M3": "can do everything"})
    req = s.make_request([])
    assert "[NoMaD, M3]" in req.system_prompt and "M3 can do everything." in req.system_prompt
    assert req.models == ("NoMaD", "M3")

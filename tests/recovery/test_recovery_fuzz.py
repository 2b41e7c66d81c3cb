"""Fuzz: 5,000 random stage answers never crash the wrapper; every round still answers a readable subtask,
and no round makes more model calls than its limit."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recovery_helpers import TASK, answer, request

from homiebot.planner.prompt import parse_output
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.recovery.llm import ScriptedLLM
from homiebot.recovery.planner import RecoveryPlanner

EXAMPLES = 250
ANSWERS_PER_EXAMPLE = 20  # 250 x 20 = 5,000 stage answers

_names = st.sampled_from(["apple", "fridge", "table", "cup", "banana", "", "x" * 60, "a,b", "[x]", '"q"'])
_actions = st.sampled_from(["Go to", "Pick", "Put", "Open", "Close", "End", "Fly", "", "pick"])
_step = st.one_of(
    st.builds(lambda a, t, p: f"[{a}, {t}, {p}]", _actions, _names, _names),
    st.builds(lambda a, t: f"[{a}, {t}]", _actions, _names),
    st.builds(lambda a, t: f"{a}({t})", _actions, _names),
    st.text(max_size=20),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=8), max_size=4),
)
_json_answer = st.fixed_dictionaries(
    {},
    optional={
        "reason": st.one_of(st.text(max_size=40), st.integers(), st.none()),
        "reasoning": st.text(max_size=40),
        "important": st.one_of(st.booleans(), st.sampled_from(["yes", "no", "maybe"]), st.integers()),
        "missing": st.one_of(st.booleans(), st.text(max_size=5)),
        "action": st.sampled_from(["skip", "insert", "replace", "explode", ""]),
        "steps": st.one_of(st.lists(_step, max_size=8), st.text(max_size=30), st.none()),
        "locations": st.one_of(st.lists(st.lists(st.text(max_size=10), max_size=4), max_size=4), st.text(max_size=10)),
    },
).map(json.dumps)
_answer = st.one_of(
    _json_answer,
    _json_answer.map(lambda j: f"Sure! Here it is:\n```json\n{j}\n```"),
    _json_answer.map(lambda j: j[: len(j) // 2]),  # cut off mid-answer (max_tokens)
    st.text(max_size=200),
    st.builds(" ".join, st.lists(_step.map(str), max_size=5)),
    st.sampled_from(["yes", "no", "{", "}", "{}", "[]", "null", "\x00", "{" * 50, "important: false"]),
)
_feedback = st.sampled_from([
    "None", "Unable to pick, the hand is full", "Unable to put, the hand is empty",
    "Unable to put, the fridge is closed, you should open it first", "Unable to go to, the target is far away",
    "apple does not exist! Please choose another object", "Unable to pick, the subtask is too difficult to perform",
    "Unable to put, and the object is missing", "The output is not in the required format!",
])
_base = st.sampled_from([answer("[Pick, apple]"), answer("[Put, apple, table]"), answer("[Go to, banana]", "PixNav"),
                         answer("[End]", "NoMaD"), "garbage with no subtask"])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answers=st.lists(_answer, min_size=ANSWERS_PER_EXAMPLE, max_size=ANSWERS_PER_EXAMPLE),
    feedback=st.lists(_feedback, min_size=12, max_size=12),
    base=st.lists(_base, min_size=12, max_size=12),
    mode=st.sampled_from(["cmfr", "cmfr", "cot"]),
    limit=st.integers(1, 4),
)
def test_random_stage_answers_never_crash_and_respect_the_call_limit(answers, feedback, base, mode, limit):
    llm = ScriptedLLM(list(answers), default="{}")
    planner = RecoveryPlanner(ScriptedPlanner(base), llm=llm, mode=mode, search=True, max_calls_per_round=limit)
    planner.reset(TASK, seed=1)
    for i, fb in enumerate(feedback):
        before = planner.stats.llm_calls
        raw = planner.plan(request(fb, round_index=i + 1))
        assert planner.stats.llm_calls - before <= limit
        output = parse_output(raw)
        if raw != "garbage with no subtask":
            assert output.subtask is not None, raw
            if not output.subtask.is_end:
                assert output.subtask.target, raw
    assert planner.stats.rounds == len(feedback)


_VALID_IMPORTANT = json.dumps({"reason": "needed", "important": True})
_NO_STEPS = json.dumps({"reason": "none", "missing": False, "steps": []})
_LOCATIONS = json.dumps({"locations": [["banana", "in", "fridge"]]})
# What each stage needs answered before it, the base planner's script and the feedback after round 1.
_SCENARIOS = {
    "importance": ([], [answer("[Pick, apple]")], "cmfr", "Unable to pick, the hand is full"),
    "preconditions": ([_VALID_IMPORTANT], [answer("[Pick, apple]")], "cmfr", "Unable to pick, the hand is full"),
    "workaround": ([_VALID_IMPORTANT, _NO_STEPS], [answer("[Pick, apple]")], "cmfr", "Unable to pick, the hand is full"),
    "post_execution": ([], [answer("[End]", "NoMaD")], "cmfr", None),
    "search": ([_LOCATIONS], [answer("[Pick, banana]")], "cmfr", None),
    "locations": ([], [answer("[Pick, banana]")], "cmfr", None),
    "cot": ([], [answer("[Pick, apple]")], "cot", "Unable to pick, the hand is full"),
}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.lists(st.tuples(st.sampled_from(sorted(_SCENARIOS)), _answer),
                        min_size=ANSWERS_PER_EXAMPLE, max_size=ANSWERS_PER_EXAMPLE))
def test_every_stage_takes_a_defined_fallback_for_any_answer(answers):
    for stage, text in answers:
        before, base, mode, failure = _SCENARIOS[stage]
        llm = ScriptedLLM([*before, text], default=json.dumps({"steps": []}))
        planner = RecoveryPlanner(ScriptedPlanner(base), llm=llm, mode=mode, search=stage in ("search", "locations"),
                                  stages="1,2,3,4")
        planner.reset(TASK, seed=1)
        outputs = [planner.plan(request("None", round_index=1))]
        if failure is not None:
            outputs.append(planner.plan(request(failure, round_index=2)))
        outputs.append(planner.plan(request("None", round_index=len(outputs) + 1)))
        assert not llm.answers, f"the {stage} answer was not used"  # the random answer reached its stage
        for raw in outputs:
            subtask = parse_output(raw).subtask
            assert subtask is not None and (subtask.is_end or subtask.target), raw

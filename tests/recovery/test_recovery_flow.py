"""Every branch of the recovery control flow (CMFR section 4.5; our specification's table 1.3(e) and decisions
D2-D5, D8), with a scripted base planner and scripted stage answers."""

from __future__ import annotations

import json

import pytest
from recovery_helpers import TASK, Driver, answer, importance, kitchen_state, request, steps_answer

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.prompt import parse_output
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.recovery.llm import ScriptedLLM
from homiebot.recovery.planner import RecoveryPlanner, feedback_code, parse_stages
from homiebot.recovery.stats import load_stats, summarize
from homiebot.types import ErrorCode

HAND_FULL = "Unable to pick, the hand is full"
CLOSED = "Unable to put, the fridge is closed, you should open it first"
TOO_HARD = "Unable to pick, the subtask is too difficult to perform"
MISSING = "apple does not exist! Please choose another object"


def test_stage1_not_important_drops_the_subtask_and_asks_the_base_planner():
    d = Driver([answer("[Pick, cup]"), answer("[Go to, table]", "NoMaD")], [importance(False, "cup is not needed")])
    assert d.step() == "[Pick, cup]"
    assert d.step(TOO_HARD) == "[Go to, table]"
    s = d.planner.stats
    assert s.failed_subtasks == 1 and s.reached == {"1": 1, "2": 0, "3": 0, "4": 0} and s.unimportant == 1
    assert s.llm_calls == 1 and s.failures_by_code == {"E1": 1}
    assert "[Pick, cup]" in d.llm.prompts[0] and "too difficult" in d.llm.prompts[0] and "(E1)" in d.llm.prompts[0]
    # What the model said is kept beside the counters, per call, for the trajectories a report explains.
    assert s.calls == [{"round": 2, "stage": "importance", "subtask": "[Pick, cup]", "code": "E1",
                        "answer": importance(False, "cup is not needed")}]
    assert s.to_json()["calls"] == s.calls


def test_stage2_preconditions_then_retry_and_its_success_is_counted():
    d = Driver([answer("[Pick, apple]"), answer("[End]", "NoMaD")],
               [importance(True, "the apple is the task"),
                steps_answer(["[Put, cup, table]"], "the hand holds the cup", missing=True),
                steps_answer([])],
               stages="1,2,3")
    assert d.step() == "[Pick, apple]"
    assert d.step(HAND_FULL) == "[Put, cup, table]"  # the precondition costs a round
    assert d.step("None") == "[Pick, apple]"  # the failed subtask again
    assert d.step("None") == "[End]"
    s = d.planner.stats
    assert s.reached["2"] == 1 and s.stage2_with_steps == 1 and s.stage2_retried == 1 and s.stage2_success == 1
    assert s.recovery_subtasks == 2 and s.reached["3"] == 0
    assert "Why the step matters: the apple is the task" in d.llm.prompts[1]  # stage 1's reason reaches stage 2


def test_stage2_without_missing_preconditions_goes_to_stage3_workaround():
    d = Driver([answer("[Pick, apple]"), answer("[End]", "NoMaD")],
               [importance(True), steps_answer([], missing=False), steps_answer(["[Go to, cup]", "[Pick, cup]"], "use the cup")],
               stages="1,2,3")
    d.step()
    assert d.step(TOO_HARD) == "[Go to, cup]"
    assert d.step() == "[Pick, cup]"
    assert d.step() == "[End]"  # the substitute replaced the subtask: no retry
    s = d.planner.stats
    assert s.reached == {"1": 1, "2": 1, "3": 1, "4": 0} and s.stage3_with_steps == 1 and s.stage2_retried == 0
    assert "No missing condition" in d.llm.prompts[2]


def test_retry_failing_again_gets_stage3_once_then_is_dropped():
    d = Driver([answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")],
               [importance(True), steps_answer(["[Open, fridge]"], missing=True), steps_answer(["[Pick, cup]"])],
               stages="1,2,3")
    d.step()
    assert d.step(TOO_HARD) == "[Open, fridge]"
    assert d.step() == "[Pick, apple]"
    assert d.step(TOO_HARD) == "[Pick, cup]"  # D2: stage 3 after the retry failed
    assert "Already tried first, without success: [Open, fridge]" in d.llm.prompts[2]
    assert d.step(TOO_HARD) == "[Go to, table]"  # the substitute failed too: dropped, no further call
    s = d.planner.stats
    assert s.llm_calls == 3 and s.stage2_success == 0 and s.recovery_failures == 2 and s.failed_subtasks == 1


def test_a_failed_recovery_step_is_dropped_and_the_queue_goes_on():
    d = Driver([answer("[Pick, apple]")],
               [importance(True), steps_answer(["[Go to, fridge]", "[Open, fridge]"], missing=True)], stages="1,2")
    d.step()
    assert d.step(TOO_HARD) == "[Go to, fridge]"
    assert d.step("Unable to go to, the subtask is too difficult to perform") == "[Open, fridge]"  # D3: no nested chain
    assert d.planner.stats.llm_calls == 2


def test_stage4_runs_once_at_the_end_and_then_ends():
    d = Driver([answer("[Go to, fridge]", "NoMaD"), answer("[End]", "NoMaD")],
               [steps_answer(["[Open, fridge]"], "the apple is still in the closed fridge")])
    d.step()
    assert d.step() == "[Open, fridge]"  # the base said End: stage 4's step instead
    assert d.step() == "[End]"  # then End without asking the base planner again
    s = d.planner.stats
    assert s.reached["4"] == 1 and s.stage4_with_steps == 1 and d.base.position == 2
    assert "finished its plan" in d.llm.prompts[0] and "[Go to, fridge] done" in d.llm.prompts[0]


def test_stage4_with_nothing_missing_passes_the_base_end_through():
    d = Driver([answer("[End]", "NoMaD")], [steps_answer([], "done")])
    assert d.step() == "[End]"
    assert d.planner.stats.reached["4"] == 1 and d.planner.stats.stage4_with_steps == 0


def test_disabled_stages_change_the_chain():
    # Without stage 1 every failure is important: the first call is stage 2.
    d = Driver([answer("[Pick, apple]")], [steps_answer(["[Open, fridge]"], missing=True)], stages="2")
    d.step()
    assert d.step(TOO_HARD) == "[Open, fridge]"
    assert "Some steps work only" in d.llm.prompts[0] and d.planner.stats.unimportant == 0
    # Without stage 2: stage 1 then stage 3.
    d = Driver([answer("[Pick, apple]")], [importance(True), steps_answer(["[Pick, cup]"])], stages="1,3")
    d.step()
    assert d.step(TOO_HARD) == "[Pick, cup]"
    assert "No missing condition" in d.llm.prompts[1]
    # Without stage 3: what stage 2 cannot fix is dropped.
    d = Driver([answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")], [importance(True), steps_answer([], missing=False)],
               stages="1,2")
    d.step()
    assert d.step(TOO_HARD) == "[Go to, table]" and d.planner.stats.llm_calls == 2
    # Without stage 4 the base planner's End ends the episode with no call.
    d = Driver([answer("[End]", "NoMaD")], [], stages="1,2,3")
    assert d.step() == "[End]" and d.planner.stats.llm_calls == 0


def test_mode_none_is_the_base_planner_with_statistics_only():
    base = ScriptedPlanner([answer("[Pick, apple]"), answer("[End]", "NoMaD")])
    planner = RecoveryPlanner(base, mode="none")
    planner.reset(TASK)
    first = planner.plan(request())
    assert first == answer("[Pick, apple]")
    assert planner.plan(request(TOO_HARD)) == answer("[End]", "NoMaD")
    assert planner.llm is None and planner.stats.failed_subtasks == 1 and planner.stats.llm_calls == 0
    assert planner.name == "scripted"


@pytest.mark.parametrize(("choice", "expected"), [
    ("skip", ["[Pick, apple]", "[Go to, table]"]),
    ("insert", ["[Pick, apple]", "[Open, fridge]", "[Pick, apple]", "[Go to, table]"]),
    ("replace", ["[Pick, apple]", "[Open, fridge]", "[Go to, table]"]),
])
def test_chain_of_thought_baseline_skip_insert_replace(choice, expected):
    cot = json.dumps({"reasoning": "think", "action": choice, "steps": ["[Open, fridge]"]})
    d = Driver([answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")], [cot], mode="cot")
    feedback = [None, TOO_HARD, "None", "None"]
    for i in range(len(expected)):
        d.step(feedback[i] or "None")
    assert d.subtasks == expected
    assert d.planner.stats.cot[choice] == 1 and d.planner.stats.llm_calls == 1
    assert "Think step by step" in d.llm.prompts[0]


def test_object_search_before_an_unknown_target_uses_the_places_in_the_task():
    d = Driver([answer("[Pick, banana]"), answer("[End]", "NoMaD")],
               [json.dumps({"locations": [["banana", "in", "fridge"]]}),
                json.dumps({"steps": ["[Go to, fridge]", "[Open, fridge]"]})],
               search=True, stages="1,2,3")
    assert d.step() == "[Go to, fridge]"  # banana is not in the state: search first
    assert d.step() == "[Open, fridge]"
    assert d.step() == "[Pick, banana]"
    s = d.planner.stats
    assert s.search_calls == 1 and s.search_steps == 2 and s.llm_calls == 2
    assert "banana in fridge" in d.llm.prompts[1]


def test_no_place_in_the_task_means_no_search_call():
    d = Driver([answer("[Pick, banana]")], [json.dumps({"locations": []})], search=True, stages="1,2,3")
    assert d.step() == "[Pick, banana]"
    assert d.planner.stats.search_calls == 0 and d.planner.stats.llm_calls == 1  # only the extraction


def test_not_found_failure_triggers_search_then_retry():
    grounded = ("apple", "fridge", "table")  # perception knows the apple's name, so no search before the subtask
    d = Driver([answer("[Pick, apple]")],
               [json.dumps({"locations": [["apple", "in", "fridge"]]}), json.dumps({"steps": ["[Open, fridge]"]})],
               search=True, stages="1,2,3")
    assert d.step(grounded=grounded, description="fridge (closed)") == "[Pick, apple]"
    assert d.step(MISSING, grounded=grounded, description="fridge (closed)") == "[Open, fridge]"
    assert d.step(grounded=grounded, description="fridge (open)") == "[Pick, apple]"
    assert d.planner.stats.failures_by_code == {"F2": 1}


def test_call_limit_per_round_takes_the_fallback_and_calls_cost_no_round():
    d = Driver([answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")], [importance(True)], max_calls_per_round=1,
               stages="1,2,3")
    d.step()
    # Stage 1 used the round's only call; stage 2 and 3 are refused: nothing to insert, back to the base planner.
    assert d.step(TOO_HARD) == "[Go to, table]"
    s = d.planner.stats
    assert s.llm_calls == 1 and s.call_limit_hits == 2 and s.rounds == 2
    # Three calls in one round with a limit of 4 still answer one subtask: the round count is the answers.
    d = Driver([answer("[Pick, apple]")], [importance(True), steps_answer([], missing=False), steps_answer(["[Pick, cup]"])],
               stages="1,2,3", max_calls_per_round=4)
    d.step()
    d.step(TOO_HARD)
    assert d.planner.stats.llm_calls == 3 and d.planner.stats.rounds == 2


@pytest.mark.parametrize("stage", ["importance", "preconditions", "workaround", "post_execution", "search", "cot"])
@pytest.mark.parametrize("garbage", ["", "I am not sure.", "{not json", '{"steps": "open the fridge"}', "[[[", "\x00\ud800"])
def test_malformed_answers_at_every_stage_take_the_fallback(stage, garbage):
    if stage == "cot":
        d = Driver([answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")], [garbage], mode="cot")
        d.step()
        assert d.step(TOO_HARD) == "[Go to, table]"  # unreadable -> skip
        assert d.planner.stats.cot["skip"] == 1
        return
    if stage == "search":
        d = Driver([answer("[Pick, banana]")], [json.dumps({"locations": [["banana", "in", "fridge"]]}), garbage],
                   search=True, stages="1,2,3")
        assert d.step() == "[Pick, banana]"  # no steps: the subtask goes ahead
        return
    if stage == "post_execution":
        d = Driver([answer("[End]", "NoMaD")], [garbage])
        assert d.step() == "[End]"
        return
    answers = {"importance": [garbage], "preconditions": [importance(True), garbage, steps_answer([])],
               "workaround": [importance(True), steps_answer([], missing=False), garbage]}[stage]
    d = Driver([answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")], answers, stages="1,2,3")
    d.step()
    assert d.step(TOO_HARD) == "[Go to, table]"  # every fallback ends with no recovery step
    if stage == "importance":
        assert d.planner.stats.unimportant == 1  # D8: unreadable importance = drop


def test_steps_that_are_not_executable_are_dropped_and_counted():
    d = Driver([answer("[Pick, apple]")],
               [importance(True), steps_answer(["[Fly, moon]", "[Put, apple]", "[End]", "[Open, fridge]"], missing=True)],
               stages="1,2")
    d.step()
    assert d.step(TOO_HARD) == "[Open, fridge]"
    assert d.planner.stats.dropped_steps == 3


class _GoalTrap:
    """A goal that fails the test if anyone reads it."""

    def __getattribute__(self, name: str):
        raise AssertionError(f"the goal was read ({name})")


class _Recorder(Planner):
    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[PlanRequest] = []

    def plan(self, request: PlanRequest) -> str:
        self.requests.append(request)
        return answer("[Pick, apple]")


def test_the_goal_is_never_read_and_an_unprivileged_base_sees_neither_state_nor_goal():
    base = _Recorder()
    llm = ScriptedLLM([importance(True), steps_answer(["[Open, fridge]"], missing=True)])
    planner = RecoveryPlanner(base, llm=llm, search=True, stages="1,2,3,4")
    assert planner.reads_state and not planner.privileged
    planner.reset(TASK)
    trap = _GoalTrap()
    planner.plan(request(goal=trap))
    planner.plan(request(TOO_HARD, goal=trap))
    assert all(r.goal is None and r.world_state is None for r in base.requests)
    assert "(fridge is closed)" in llm.prompts[0] and "(apple in fridge)" in llm.prompts[0]


class _StateReader(_Recorder):
    """A base planner that reads the world state (the text mode of a model planner describes the world from it)."""

    name = "state-reader"
    reads_state = True


def test_a_base_that_reads_the_state_gets_it_but_never_the_goal():
    base = _StateReader()
    planner = RecoveryPlanner(base, llm=ScriptedLLM([]), search=False, stages="1,2,3,4")
    planner.reset(TASK)
    trap = _GoalTrap()
    planner.plan(request(goal=trap))
    assert base.requests and all(r.goal is None for r in base.requests)
    assert all(r.world_state is not None for r in base.requests)


def test_feedback_code_field_or_message():
    assert feedback_code(request(HAND_FULL)) is ErrorCode.L1
    assert feedback_code(request(CLOSED)) is ErrorCode.L3
    assert feedback_code(request("None")) is ErrorCode.OK
    assert feedback_code(request("The output is not in the required format!")) is ErrorCode.F1
    r = request(HAND_FULL)
    r.last_error = ErrorCode.E2  # the code beside the message wins
    assert feedback_code(r) is ErrorCode.E2


def test_bad_options_are_refused_with_one_line():
    with pytest.raises(ValueError, match="stages are 1, 2, 3 and 4"):
        parse_stages("1,5")
    with pytest.raises(ValueError, match="numbers 1-4"):
        parse_stages("one")
    with pytest.raises(ValueError, match="mode must be one of"):
        RecoveryPlanner(ScriptedPlanner([]), llm=ScriptedLLM(), mode="magic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no language model"):
        RecoveryPlanner(ScriptedPlanner([]))


def test_statistics_files_pool_into_the_summary(tmp_path):
    d = Driver([answer("[Pick, apple]"), answer("[End]", "NoMaD")],
               [importance(True), steps_answer(["[Put, cup, table]"], missing=True), steps_answer([])],
               stats_dir=str(tmp_path), stages="1,2,3,4")
    d.step()
    d.step(HAND_FULL)
    d.step()
    d.step()
    episodes = load_stats(tmp_path)
    assert len(episodes) == 1 and episodes[0]["instruction"] == TASK and episodes[0]["seed"] == 7
    summary = summarize(episodes)
    assert summary["reached_share"] == {"1": 1.0, "2": 1.0, "3": 0.0}
    assert summary["stage2_success"] == 1.0 and summary["failures_by_code"] == {"L1": 1}
    assert summary["llm_calls_per_episode"] == 3.0


def test_answers_name_the_expert_models_for_each_action():
    d = Driver([answer("[Pick, apple]")],
               [importance(True), steps_answer(["[Go to, fridge]", "[Open, fridge]", "[Go to, cup]", "[Put, cup, table]"], missing=True)],
               stages="1,2", max_steps=4)
    d.step()
    raws = []
    feedback = [TOO_HARD, "None", "None", "None"]
    for fb in feedback:
        raws.append(d.planner.plan(request(fb)))
    assert [parse_output(r).model for r in raws] == ["NoMaD", "octo", "PixNav", "RT-1-X"]


def test_the_state_clauses_follow_cmfr_appendix_e():
    from homiebot.recovery.scene import describe_state, mentioned_names

    state = kitchen_state(held="cup")
    names = mentioned_names(state, [TASK])
    assert names == ["apple", "fridge", "table"]
    text = describe_state(state, names)
    assert text == "(apple in fridge), (fridge is closed), (fridge contains apple), (agent holding cup), (agent in kitchen)"
    # A container the plan never named still says whether it is open (what a failed pick from it turns on).
    assert describe_state(state, ["apple"]) == "(apple in fridge), (fridge is closed), (agent holding cup), (agent in kitchen)"
    assert describe_state(state, ["cup"]) == "(agent holding cup), (agent in kitchen)"


def test_echoed_and_repeated_steps_are_dropped():
    d = Driver([answer("[Pick, apple]")],
               [importance(True), steps_answer(["[Pick, apple]", "[Open, fridge]", "[open,  fridge]"], missing=True)],
               stages="1,2")
    d.step()
    assert d.step(TOO_HARD) == "[Open, fridge]"
    assert d.step() == "[Pick, apple]"  # the retry, once
    assert d.planner.stats.dropped_steps == 2


def test_the_session_gives_the_wrapper_the_state_and_the_code_but_never_the_goal():
    from homiebot.agent.session import PlannerSession
    from homiebot.types import Feedback, PlannerOutput, Subtask

    planner = RecoveryPlanner(ScriptedPlanner([]), llm=ScriptedLLM())
    session = PlannerSession(TASK, planner)
    state = kitchen_state()
    session.record(PlannerOutput(raw="x", subtask=Subtask("Pick", "apple"), model="RT-1-X"),
                   Feedback(ErrorCode.L1, HAND_FULL))
    req = session.make_request([], world_state=state, goal=_GoalTrap())
    assert req.world_state is state and req.goal is None and req.last_error is ErrorCode.L1


def test_at_most_max_steps_per_answer_and_no_step_refused_for_a_lasting_reason():
    d = Driver([answer("[Open, table]", "octo"), answer("[Pick, apple]"), answer("[Go to, table]", "NoMaD")],
               [importance(False),
                importance(True), steps_answer(["[Open, table]", "[Go to, fridge]", "[Open, fridge]", "[Pick, cup]"],
                                               missing=True)],
               stages="1,2")
    d.step()
    assert d.step("Can not open table! Please choose another object") == "[Pick, apple]"  # L4: dropped by stage 1
    assert d.step(TOO_HARD) == "[Go to, fridge]"  # [Open, table] was refused (L4) earlier: not tried again
    assert d.step() == "[Open, fridge]"
    assert d.step() == "[Pick, apple]"  # the retry: [Pick, cup] was over the two-step limit
    assert d.planner.stats.dropped_steps == 2
    assert "{0,1}" in d.llm.grammars[-1]  # the grammar allows two steps as well

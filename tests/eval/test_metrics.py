"""EMMOE metrics: appendix C's SER and SRR examples, PLWSR, the error tables H3-H6, table 4, table H8, edge cases."""

from __future__ import annotations

from fractions import Fraction

import pytest

from homiebot.eval.metrics import (
    EpisodeScore,
    ExpertReference,
    action_table,
    attribute_table,
    count_replans,
    error_table,
    exact_mean_tp,
    score_episode,
    split_summaries,
    summarize,
)
from homiebot.tasks.goals import GoalSpec
from homiebot.tasks.suite import TaskSpec
from homiebot.testing.paper_examples import C1_KEYPATHS, C1_STEPS, C2_KEYPATHS, C2_STEPS, emmoe_resolver, trajectory
from homiebot.types import ErrorCode

GOAL = GoalSpec.model_validate({"all": [{"type": "articulation", "furniture": "fridge", "state": "closed"}]})


def task(keypaths, *, task_id="t", split="train", attributes=("short-horizon",)) -> TaskSpec:
    return TaskSpec(
        id=task_id, instruction="x", scene="s", attributes=list(attributes), split=split, keypaths=keypaths, goal=GOAL
    )


C1_TASK = task(C1_KEYPATHS, task_id="c1", attributes=("short-horizon", "logical"))
C2_TASK = task(C2_KEYPATHS, task_id="c2", split="test", attributes=("long-horizon", "human-style"))


def score(steps, spec, **kw) -> EpisodeScore:
    expert = kw.pop("expert", None)
    return score_episode(trajectory(steps, task_id=spec.id, **kw), spec, emmoe_resolver(), expert=expert)


def test_appendix_c2_success_end() -> None:
    s = score(C2_STEPS, C2_TASK)
    assert s.success and s.ended and s.tp == 1.0
    # The C.1 run has no End (20 steps, round limit): it is not in SER's denominator.
    f = score(C1_STEPS, C1_TASK)
    assert not f.success and not f.ended and f.tp_exact == "1/2"
    summary = summarize([s, f])
    assert summary.ser == 1.0 and summary.n_ended == 1
    # A failed trajectory that ends with End (the agent wrongly deems it done) lowers SER to 1/2.
    wrong_end = score([("[Go to, fridge]", True), ("[End]", True)], C2_TASK)
    assert wrong_end.ended and not wrong_end.success
    assert summarize([s, f, wrong_end]).ser == pytest.approx(0.5)


def test_appendix_c3_replans() -> None:
    # C.2: step 5 fails, step 6 (Open fridge) is a re-plan even though it fails, and so is step 7.
    assert count_replans(trajectory(C2_STEPS)) == 2
    # C.1: nine failed puts, each followed by a Go to: nine re-plans, none successful.
    assert count_replans(trajectory(C1_STEPS)) == 9
    summary = summarize([score(C2_STEPS, C2_TASK), score(C1_STEPS, C1_TASK)])
    assert (summary.replans_success, summary.replans_all) == (2, 11)
    assert summary.srr == pytest.approx(2 / 11)


def test_sr_tp_and_exact_mean() -> None:
    scores = [score(C2_STEPS, C2_TASK), score(C1_STEPS, C1_TASK)]
    summary = summarize(scores)
    assert summary.sr == 0.5 and summary.n_success == 1
    assert summary.tp == pytest.approx(0.75)
    assert exact_mean_tp(scores) == Fraction(3, 4)


def test_plwsr_uses_the_expert_length_in_rounds() -> None:
    # Expert did it in 8 rounds; the agent in 16: weight 8/16. A failure weighs 0; a shorter agent weighs 1.
    agent = score(C2_STEPS, C2_TASK, expert=ExpertReference(rounds=8, path_length=4.0))
    assert agent.plw == pytest.approx(0.5)
    shorter = score(C2_STEPS, C2_TASK, expert=ExpertReference(rounds=20, path_length=4.0))
    assert shorter.plw == 1.0
    failed = score(C1_STEPS, C1_TASK, expert=ExpertReference(rounds=4, path_length=1.0))
    assert failed.plw == 0.0
    summary = summarize([agent, shorter, failed])
    assert summary.plwsr == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert summary.plwsr <= summary.sr


def test_plwsr_is_na_when_a_success_lacks_its_expert_reference() -> None:
    summary = summarize([score(C2_STEPS, C2_TASK), score(C1_STEPS, C1_TASK)])
    assert summary.plwsr is None and summary.n_missing_expert == 1
    # Failures need no reference.
    only_failures = summarize([score(C1_STEPS, C1_TASK)])
    assert only_failures.plwsr == 0.0


def test_path_length_variant_in_metres() -> None:
    traj = trajectory(C2_STEPS, task_id="c2")
    traj.path_length = 10.0
    s = score_episode(traj, C2_TASK, emmoe_resolver(), expert=ExpertReference(rounds=16, path_length=7.5))
    assert s.plw == 1.0 and s.plw_path == pytest.approx(0.75)


def test_divisions_by_zero_are_none() -> None:
    empty = summarize([])
    assert empty.sr is None and empty.tp is None and empty.ser is None and empty.srr is None and empty.plwsr is None
    # No failure anywhere: SRR has no denominator. No End anywhere: SER has none.
    clean = summarize([score([("[Open, fridge]", True)], C2_TASK)])
    assert clean.srr is None and clean.ser is None and clean.sr == 0.0


def test_error_tables_h3_to_h6() -> None:
    c2 = score(C2_STEPS, C2_TASK, failure_code=ErrorCode.L3)  # 2 errors in 16 rounds, successful
    c1 = score(C1_STEPS, C1_TASK, failure_code=ErrorCode.E1)  # 9 errors in 20 rounds, failed
    mixed = score(
        [("[Pick, yellow_box]", False), ("[Go to, fridge]", True), ("[End]", True)], C2_TASK, failure_code=ErrorCode.D1
    )
    ok = error_table([c2, c1, mixed], successful=True)
    assert ok.counts["L3"] == 2 and ok.n_errors == 2 and ok.n_rounds == 16 and ok.n_trajectories == 1
    assert ok.share("L3") == 1.0 and ok.share("L") == 1.0 and ok.share("All") == pytest.approx(2 / 16)
    bad = error_table([c2, c1, mixed], successful=False)
    assert bad.counts["E1"] == 9 and bad.counts["D1"] == 1 and bad.n_errors == 10 and bad.n_rounds == 23
    assert bad.family_counts == {"L": 0, "D": 1, "F": 0, "E": 9}
    assert bad.share("E") == pytest.approx(0.9) and bad.share("D1") == pytest.approx(0.1)
    assert bad.to_json()["shares"]["All"] == pytest.approx(10 / 23)
    assert error_table([], successful=True).share("L1") is None


def test_table4_per_action_share_and_per_attempt_sr() -> None:
    c1 = score(C1_STEPS, C1_TASK)  # 9 failed Puts (E1, 3 tries each), 11 Go to/Open successes (1 try)
    rows = {r.action: r for r in action_table([c1])}
    put = rows["Put"]
    assert (put.exec_errors, put.executions, put.attempts, put.successes) == (9, 9, 27, 0)
    assert put.p == 1.0 and put.sr == 0.0
    go = rows["Go to"]
    assert (go.executions, go.attempts, go.successes) == (10, 10, 10) and go.sr == 1.0 and go.p == 0.0
    assert rows["Open"].sr == 1.0 and rows["Close"].sr is None and rows["Close"].p == 0.0


def test_table4_errors_caught_before_execution_are_not_executions() -> None:
    # An L1 pick never reached the skill: neither an attempt nor an execution error.
    s = score([("[Pick, yellow_box]", False), ("[Pick, yellow_box]", True)], C2_TASK, failure_code=ErrorCode.L1)
    pick = {r.action: r for r in action_table([s])}["Pick"]
    assert (pick.executions, pick.attempts, pick.successes, pick.exec_errors) == (1, 1, 1, 0)
    assert pick.p is None  # no execution error at all


def test_table4_success_after_retries_counts_each_try() -> None:
    traj = trajectory([("[Pick, yellow_box]", True)])
    traj.rounds[0].feedback = type(traj.rounds[0].feedback)(ErrorCode.OK, "None", attempts=2)
    s = score_episode(traj, C2_TASK, emmoe_resolver())
    pick = {r.action: r for r in action_table([s])}["Pick"]
    assert pick.sr == 0.5 and pick.sr_execution == 1.0


def test_attribute_table_h8_and_splits() -> None:
    scores = [score(C2_STEPS, C2_TASK), score(C2_STEPS, C2_TASK), score(C1_STEPS, C1_TASK)]
    rows = {r.attribute: r for r in attribute_table(scores)}
    assert rows["long-horizon"].sr == 1.0 and rows["long-horizon"].n == 2
    assert rows["short-horizon"].sr == 0.0 and rows["logical"].n == 1
    assert rows["short-horizon"].tp == 0.5 and rows["long-horizon"].tp == 1.0 and rows["open-ended"].tp is None
    assert rows["open-ended"].sr is None and rows["open-ended"].n == 0
    splits = split_summaries(scores)
    assert splits["test"].sr == 1.0 and splits["train"].sr == 0.0 and splits["train"].n == 1


def test_goal_check_reported_beside_sr() -> None:
    ok_both = score(C2_STEPS, C2_TASK, goal_satisfied=True)
    tp_only = score(C2_STEPS, C2_TASK, goal_satisfied=False)
    goal_only = score(C1_STEPS, C1_TASK, goal_satisfied=True)
    unchecked = score(C1_STEPS, C1_TASK, goal_satisfied=None)
    summary = summarize([ok_both, tp_only, goal_only, unchecked])
    agreement = summary.goal_agreement
    assert (agreement.both, agreement.tp_only, agreement.goal_only, agreement.neither, agreement.unchecked) == (1, 1, 1, 0, 1)
    assert summary.sr == 0.5  # SR follows TP only
    assert summary.goal_sr == pytest.approx(2 / 3)


def test_unparseable_round_is_a_failure_and_replan_trigger() -> None:
    traj = trajectory([("[Go to, fridge]", True), ("[End]", True)], task_id="c2")
    from homiebot.types import Feedback, PlannerOutput

    traj.rounds[0].output = PlannerOutput(raw="gibberish", parse_error="no template")
    traj.rounds[0].feedback = Feedback(ErrorCode.F1, "format", attempts=0)
    s = score_episode(traj, C2_TASK, emmoe_resolver())
    assert s.replans == 1 and s.errors == {"F1": 1} and s.ended and not s.success


def test_infra_errors_are_failures_counted_apart() -> None:
    traj = trajectory(C2_STEPS, task_id="c2")
    traj.error = "simulator crashed"
    s = score_episode(traj, C2_TASK, emmoe_resolver())
    summary = summarize([s])
    assert summary.n_infra_errors == 1 and summary.sr == 0.0 and not s.success


def test_episode_score_json_round_trip() -> None:
    s = score(C1_STEPS, C1_TASK, expert=ExpertReference(rounds=5, path_length=2.0))
    assert EpisodeScore.from_json(s.to_json()) == s

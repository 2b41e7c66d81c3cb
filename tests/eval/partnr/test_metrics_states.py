"""Recorded states (states.jsonl) and PARTNR's metrics: a real episode's states survive the round trip, PC is
recomputed from them alone, extraneous effort and exploration on hand-made rounds, the expert on EMMOE-100."""

from __future__ import annotations

import json

import pytest
from worlds import obj, world

from homiebot.eval.partnr.metrics import exploration_rounds, extraneous_effort, format_tables, summarize
from homiebot.eval.partnr.states import StatesError, read_states, snapshot_lines, write_states
from homiebot.tasks.partnr.language import EvaluationFunction, EvaluationProposition, TerminalSatisfactionConstraint
from homiebot.tasks.partnr.tracker import evaluate_states
from homiebot.types import ErrorCode, Feedback, PlannerOutput, RoundRecord, Subtask


def rnd(index: int, action: str, target: str, place: str | None = None, ok: bool = True) -> RoundRecord:
    code = ErrorCode.OK if ok else ErrorCode.E1
    return RoundRecord(index, "", PlannerOutput("", subtask=Subtask(action, target, place)), Feedback(code, "None"))


def cup_and_book_function() -> EvaluationFunction:
    props = (EvaluationProposition("is_on_top", {"object_handles": ["cup"], "receptacle_handles": ["table"]}),
             EvaluationProposition("is_on_top", {"object_handles": ["book"], "receptacle_handles": ["counter"]}))
    return EvaluationFunction(props, (), (TerminalSatisfactionConstraint((0, 1)),))


def test_extraneous_effort_counts_puts_that_did_not_help():
    fn = cup_and_book_function()
    states = [world(), world(), world(obj("cup", "sink")), world(obj("cup", "table")),
              world(obj("cup", "table")), world(obj("cup", "table"), obj("book", "counter"))]
    rounds = [rnd(1, "Pick", "cup"), rnd(2, "Put", "cup", "sink"), rnd(3, "Put", "cup", "table"),
              rnd(4, "Pick", "book"), rnd(5, "Put", "book", "counter")]
    result = evaluate_states(fn, states)
    assert result.progress == (0.0, 0.0, 0.0, 0.5, 0.5, 1.0)
    # events: progress rounds {3, 5} and puts {2, 3, 5}: one of three did not help
    assert extraneous_effort(result, rounds) == pytest.approx(1 / 3)
    assert exploration_rounds(rounds) == 0
    assert exploration_rounds([rnd(1, "Go to", "cup"), rnd(2, "Pick", "cup", ok=False), rnd(3, "Pick", "cup")]) == 2
    assert exploration_rounds([rnd(1, "Go to", "cup")]) is None
    # not successful: extraneous effort is not defined (None, never 0)
    assert extraneous_effort(evaluate_states(fn, states[:4]), rounds[:3]) is None


def test_states_round_trip_and_pc_from_the_file_alone(tmp_path):
    pytest.importorskip("mujoco")
    from homiebot.eval.partnr.episodes import run_scored
    from homiebot.planner.registry import make_planner
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.tasks.suite import load_suite

    (task,) = [t for t in load_suite("partnr").tasks if "next to each other" in t.instruction][:1]
    sim = MujocoSimulator(render=False)
    try:
        scored = run_scored(sim, make_planner("partnr_expert"), task)
    finally:
        sim.shutdown()
    assert scored.partnr.success
    write_states(tmp_path / "states.jsonl", scored.states)
    lines = [json.loads(x) for x in (tmp_path / "states.jsonl").read_text().splitlines()]
    assert len(lines) == len(scored.trajectory.rounds) + 1
    assert len(lines[0]["entities"]) == len(scored.states[0].entities)
    assert max(len(x["entities"]) for x in lines[1:]) <= 3  # later lines: what changed only
    back = read_states(tmp_path)
    assert back is not None
    fn = EvaluationFunction.from_json(task.evaluation, task.id)
    original, reread = evaluate_states(fn, scored.states), evaluate_states(fn, back)
    assert reread == original and reread.success
    assert read_states(tmp_path / "missing") is None
    (tmp_path / "states.jsonl").write_text('{"round": 1}\n')
    with pytest.raises(StatesError, match="line 0 has round 1"):
        read_states(tmp_path)


def test_snapshot_lines_diff_only_changes():
    lines = list(snapshot_lines([world(), world(), world(obj("cup", "table"))]))
    assert lines[1]["entities"] == {}
    assert set(lines[2]["entities"]) == {"cup"}
    assert set(lines[2]["entities"]["cup"]) == {"room", "parent", "bbox_min", "bbox_max"}


def test_summary_tables_and_agreement():
    from homiebot.eval.partnr.metrics import PartnrEpisode

    def ep(task: str, category: str, success: bool, goal: bool | None) -> PartnrEpisode:
        return PartnrEpisode(task, category, 1.0 if success else 0.5, success, goal, True, 6, 10.0, None,
                             0.0 if success else None, 2, "", "none" if success else "missing steps")

    summary = summarize([ep("a", "spatial", True, True), ep("b", "spatial", False, False),
                         ep("c", "temporal", True, False), ep("d", "constraint-free", False, None)])
    assert summary.sr == 0.5 and summary.pc == 0.75
    assert summary.sr_by_category["spatial"] == (0.5, 2) and summary.sr_by_category["heterogeneous"] is None
    assert summary.agreement == {"both": 1, "partnr_only": 1, "goal_only": 0, "neither": 1}
    assert summary.sim_time_s is None
    text = format_tables(summary, "t")
    assert "| n/a (one agent) |" in text and "0.50 (n=2)" in text and "| n/a |" in text


@pytest.mark.slow
def test_noiseless_expert_reaches_pc_1_on_all_emmoe_tasks():
    pytest.importorskip("mujoco")
    from homiebot.eval.partnr.episodes import run_suite
    from homiebot.planner.registry import make_planner
    from homiebot.tasks.suite import load_suite

    episodes = run_suite(load_suite("emmoe100").tasks, lambda: make_planner("expert"))
    assert len(episodes) == 100
    assert [e.task_id for e in episodes if e.pc != 1.0] == []
    assert all(e.goal_check for e in episodes)  # full agreement with the goal check


def test_record_with_states_rescored_from_its_files_alone(tmp_path):
    pytest.importorskip("mujoco")
    from homiebot.agent.loop import EpisodeConfig, run_episode
    from homiebot.data.record import EpisodeRecorder
    from homiebot.eval.partnr.recording import StatesFileRecorder, score_record
    from homiebot.planner.registry import make_planner
    from homiebot.sim.mujoco.backend import MujocoSimulator
    from homiebot.tasks.partnr.convert import task_function
    from homiebot.tasks.suite import load_suite
    from homiebot.types import HOUSEHOLD_ACTIONS

    (task,) = [t for t in load_suite("partnr").tasks if t.instruction.startswith("First put")][:1]
    sim = MujocoSimulator(render=False)
    try:
        sim.reset(task.scene, seed=task.seed)
        fn = task_function(task, sim.state())
        recorder = EpisodeRecorder(tmp_path / "ep", images=False, video=False)
        config = EpisodeConfig.with_actions(HOUSEHOLD_ACTIONS, render=False)
        run_episode(sim, make_planner("partnr_expert"), task=task, config=config, recorder=recorder,
                    observers=[StatesFileRecorder(recorder, fn)])
    finally:
        sim.shutdown()
    assert (tmp_path / "ep" / "states.jsonl").is_file() and (tmp_path / "ep" / "evaluation.json").is_file()
    scored = score_record(tmp_path / "ep")
    assert scored is not None and scored.pc == 1.0 and scored.success and scored.category == "temporal"
    # an older record without the state file: n/a (None), never a PC of 0
    (tmp_path / "ep" / "states.jsonl").unlink()
    assert score_record(tmp_path / "ep") is None

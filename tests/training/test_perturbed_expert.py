"""The perturbed expert makes the decision errors it means to, never two in a row, and still reaches the goal;
``homie data collect`` records such episodes, and they give re-plan pairs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.cli import build_app
from homiebot.planner.perturbed import PerturbedExpertPlanner
from homiebot.sim.base import make_simulator
from homiebot.tasks.suite import load_suite
from homiebot.training.build import BuildOptions, collect
from homiebot.types import ErrorCode


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=False)
    yield simulator
    simulator.shutdown()


def test_injected_errors_are_the_intended_decision_errors_and_the_goal_is_reached(sim):
    tasks = [t for t in load_suite("emmoe100").tasks if t.split == "train"][:6]
    seen_codes: set[str] = set()
    injected = 0
    for run, task in enumerate(tasks):
        planner = PerturbedExpertPlanner(inject=0.5)
        trajectory = run_episode(sim, planner, task=task, seed=run, config=EpisodeConfig(render=False))
        assert trajectory.ended and trajectory.goal_satisfied, (task.id, [r.subtask_text for r in trajectory.rounds])
        by_round = {i.round_index: i for i in planner.injections}
        for record in trajectory.rounds:
            injection = by_round.get(record.index)
            if injection is None:
                assert record.feedback.code is ErrorCode.OK, (task.id, record.subtask_text, record.feedback)
            else:
                assert record.output.subtask == injection.subtask
                assert record.feedback.code.value == injection.expected_code
        rounds = sorted(by_round)
        assert all(b - a > 1 for a, b in zip(rounds, rounds[1:], strict=False)), "two injections in a row"
        injected += len(rounds)
        seen_codes |= {i.expected_code for i in planner.injections}
    assert injected >= 6 and len(seen_codes) >= 3, (injected, seen_codes)


def test_same_task_and_seed_give_the_same_injections(sim):
    task = load_suite("emmoe100").tasks[0]
    runs = []
    for _ in range(2):
        planner = PerturbedExpertPlanner(inject=0.5)
        run_episode(sim, planner, task=task, seed=3, config=EpisodeConfig(render=False))
        runs.append(planner.injections)
    assert runs[0] == runs[1]


def test_without_injection_it_is_the_expert(sim):
    task = load_suite("emmoe100").tasks[1]
    planner = PerturbedExpertPlanner(inject=0.0)
    trajectory = run_episode(sim, planner, task=task, config=EpisodeConfig(render=False))
    assert not planner.injections and {r.feedback.code for r in trajectory.rounds} == {ErrorCode.OK}
    with pytest.raises(ValueError, match="probability"):
        PerturbedExpertPlanner(inject=1.5)


def test_homie_data_collect_records_episodes_that_give_replan_pairs(tmp_path):
    out = tmp_path / "collected"
    args = [
        "data",
        "collect",
        "--out",
        str(out),
        "--tasks",
        "emmoe-001,emmoe-002",
        "--runs",
        "2",
        "--inject",
        "0.4",
        "--seed-offset",
        "100",
    ]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert "4 episodes recorded (0 already there), 4 successful" in result.output
    again = CliRunner().invoke(build_app(), args)
    assert "0 episodes recorded (4 already there)" in again.output
    built, _ = collect([out], "dpo", BuildOptions(rewrites=0))
    assert built.stats.per_kind["replan"] >= 1
    other = CliRunner().invoke(build_app(), [*args[:-2], "--seed-offset", "125"])
    assert other.exit_code == 2 and "other settings" in other.output

"""The ablation table over real evaluation directories (the recovery wrapper in mode none around a scripted
planner on the embedded simulator): rows compare only the episodes every directory finished."""

from __future__ import annotations

import pytest

from homiebot.eval.recovery_ablation import ablation, main, stage_counts, steps_ok
from homiebot.eval.runner import EvalSettings, run_evaluation
from homiebot.recovery.stats import summarize

GO = "Analysis: go\nSubtask: [Go to, kitchen_counter]\nModel: NoMaD"
PICK = "Analysis: pick\nSubtask: [Pick, nothing_here]\nModel: RT-1-X"


def _evaluate(out, tasks, outputs):
    settings = EvalSettings(planner="recovery", planner_options={
        "base": "scripted", "base_options": {"outputs": outputs}, "mode": "none", "stats_dir": str(out / "recovery")})
    run_evaluation(settings, out, runs=1, workers=1, task_ids=tasks, progress=False, report=False)


@pytest.mark.slow
def test_ablation_compares_the_common_episodes(tmp_path):
    _evaluate(tmp_path / "a", ["emmoe-001"], [GO])
    _evaluate(tmp_path / "b", ["emmoe-001", "emmoe-002"], [PICK, GO])
    text = ablation({"first": tmp_path / "a", "second": tmp_path / "b"})
    assert text.startswith("1 episode(s) every configuration finished: emmoe-001/run0")
    rows = [line for line in text.splitlines() if line.startswith("| first") or line.startswith("| second")]
    assert len(rows) == 2 and "F2 1" in rows[1] and "| 0.0 |" in rows[0]
    assert "| none | 0 / 0 |" in rows[0]  # mode none: no stage fires, no recovery step runs
    assert main([f"x={tmp_path / 'a'}", f"y={tmp_path / 'missing'}"]) == 2


def test_the_stage_column_counts_what_fired_and_what_it_did():
    episodes = [
        {"failed_subtasks": 3, "reached": {"1": 3, "2": 2, "3": 1, "4": 1}, "unimportant": 1, "stage2_with_steps": 1,
         "stage2_retried": 1, "stage2_success": 1, "stage3_with_steps": 0, "stage4_with_steps": 1,
         "recovery_subtasks": 4, "recovery_failures": 1},
        {"failed_subtasks": 1, "reached": {"1": 1, "2": 1, "3": 1, "4": 0}, "recovery_subtasks": 1, "recovery_failures": 1},
    ]
    summary = summarize(episodes)
    assert summary["counts"]["reached"] == {"1": 4, "2": 3, "3": 2, "4": 1}
    assert stage_counts(summary) == "1: 4 (1 dropped); 2: 3 (1 steps, 1/1 retries ok); 3: 2 (0 steps); 4: 1 (1 steps)"
    assert steps_ok(summary) == "3 / 5"
    assert stage_counts(summarize([{"cot": {"skip": 2, "insert": 1, "replace": 0}}])) == "skip 2, insert 1, replace 0"
    assert stage_counts({}) == steps_ok({}) == "n/a"

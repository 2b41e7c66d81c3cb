"""The ablation table over real evaluation directories (the recovery wrapper in mode none around a scripted
planner on the embedded simulator): rows compare only the episodes every directory finished."""

from __future__ import annotations

import pytest

from homiebot.eval.runner import EvalSettings, run_evaluation
from homiebot.recovery.ablation import ablation, main

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
    assert main([f"x={tmp_path / 'a'}", f"y={tmp_path / 'missing'}"]) == 2

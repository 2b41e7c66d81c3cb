"""report.json's top-level summary, errors.png without errors, and report files under the user's umask."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from test_metrics import C1_STEPS, C1_TASK, C2_STEPS, C2_TASK, score

from homiebot.eval import report as report_module
from homiebot.eval.metrics import ExpertReference
from homiebot.eval.report import SUMMARY_KEYS, build_report, write_report
from homiebot.types import ErrorCode


def test_summary_holds_the_headline_figures() -> None:
    scores = [score(C2_STEPS, C2_TASK, expert=ExpertReference(8, 3.0), failure_code=ErrorCode.D1), score(C1_STEPS, C1_TASK)]
    report = json.loads(json.dumps(build_report(scores, {"planner": "expert", "noise": "off"})))
    summary = report["summary"]
    assert list(report)[0] == "summary"
    assert set(summary) == {"episodes", "sr", "plwsr", "tp", "ser", "srr", "goal_sr"}
    assert summary["episodes"] == 2 == report["table2"]["n"]
    assert summary["sr"] == pytest.approx(0.5) and summary["plwsr"] == pytest.approx(0.25)
    for key in SUMMARY_KEYS:
        assert summary[key] == report["table2"][key]


def test_errors_plot_without_errors_has_a_real_axis(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # One successful episode without an error round, and no failed trajectory at all.
    report = build_report([score([(text, True) for text, _ in C2_STEPS], C2_TASK)], {"planner": "expert", "noise": "off"})
    assert report["errors_successful"]["n_errors"] == 0 and report["errors_failed"]["n_trajectories"] == 0
    seen: dict[str, Any] = {}
    real_save = report_module._save_figure

    def capture(fig: Any, path: Path) -> None:
        if path.name == "errors.png":
            ax = fig.axes[0]
            seen["ylim"] = ax.get_ylim()
            seen["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
            seen["texts"] = [t.get_text() for t in ax.texts]
        real_save(fig, path)

    monkeypatch.setattr(report_module, "_save_figure", capture)
    report_module.write_plots(report, tmp_path)
    assert seen["ylim"] == (0.0, 100.0)
    assert not any("n/a" in label for label in seen["legend"]), seen["legend"]
    assert "failed trajectories (0 errors, no trajectories)" in seen["legend"]
    assert "no errors in any round" in seen["texts"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_report_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        write_report([score(C1_STEPS, C1_TASK)], {"planner": "expert", "noise": "off"}, tmp_path)
    finally:
        os.umask(old)
    for path in [tmp_path / "report.json", tmp_path / "report.md", *(tmp_path / "plots").iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path

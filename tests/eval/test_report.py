"""Report layout: the paper's tables in Markdown and JSON, n/a cells, the calibration interval, the plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_metrics import C1_STEPS, C1_TASK, C2_STEPS, C2_TASK, score

from homiebot.eval.metrics import ExpertReference
from homiebot.eval.report import build_report, render_markdown, wilson_interval, write_report
from homiebot.types import ErrorCode


@pytest.fixture()
def scores():
    return [
        score(C2_STEPS, C2_TASK, expert=ExpertReference(8, 3.0), failure_code=ErrorCode.D1),
        score(C1_STEPS, C1_TASK),
    ]


def test_markdown_has_every_table_in_paper_layout(scores) -> None:
    report = build_report(scores, {"suite": "demo", "planner": "expert", "noise": "emmoe"})
    md = render_markdown(report)
    for title in ("Table 2", "Table 3", "Table 4", "Table H3", "Table H4", "Table H5", "Table H6", "Table H8"):
        assert f"## {title}" in md
    assert "| L1 | L2 | L3 | L4 | L | D1 | D2 | D | F1 | F2 | F | E1 | E2 | E | All |" in md
    # H5: the successful trajectory's two D1 errors among 16 rounds; H6: the nine failed puts (E1) in 20 rounds.
    assert "| 0 | 0 | 0 | 0 | 0/2 | 2 | 0 | 2/2 | 0 | 0 | 0/2 | 0 | 0 | 0/2 | 2/16 |" in md
    assert "| 0 | 0 | 0 | 0 | 0/9 | 0 | 0 | 0/9 | 0 | 0 | 0/9 | 9 | 0 | 9/9 | 9/20 |" in md
    # Table 2 row: SR 50, PLWSR 25 (8/16 for the success, 0 for the failure), TP 75, SRR 2/11, SER 100.
    assert "| 2 | 50.00 | 25.00 | 75.00 | 18.18 | 100.00 |" in md
    # The test split has one successful episode, the open-ended attribute none: n/a, never 0.
    assert "| n/a |" in md
    assert "c1" in md and "1/2" in md  # the unsolved task is listed with its TP


def test_json_is_complete_and_serialisable(scores) -> None:
    report = build_report(scores, {"planner": "expert", "noise": "off"})
    data = json.loads(json.dumps(report))
    assert set(data) >= {"setting", "table2", "table3", "table4", "table4_calibration", "errors_successful",
                         "errors_failed", "tableH8", "per_task"}
    assert data["table2"]["ser"] == 1.0 and data["table3"]["train"]["ser"] is None
    assert [r["action"] for r in data["table4"]] == ["Go to", "Pick", "Put", "Open", "Close"]


def test_wilson_interval() -> None:
    low, high = wilson_interval(45, 100)
    assert low == pytest.approx(0.3561, abs=1e-3) and high == pytest.approx(0.5476, abs=1e-3)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 10)[0] == 0.0


def test_write_report_files(tmp_path: Path, scores) -> None:
    write_report(scores, {"planner": "expert", "noise": "off"}, tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"report.json", "report.md", "plots"}
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"errors.png", "attributes.png", "actions.png"}
    assert (tmp_path / "plots" / "errors.png").read_bytes()[:4] == b"\x89PNG"
    assert "![error shares](plots/errors.png)" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "report.md").stat().st_mode & 0o044 == 0o044  # readable by all


def test_split_table_has_the_validation_split_of_a_suite_that_has_one(scores, capsys) -> None:
    # The PARTNR-style suite's apartment 6 is its validation split (docs/partnr.md); EMMOE-100 has train and test.
    from dataclasses import replace

    from homiebot.cli.eval import _print_summary

    partnr = [*scores, replace(scores[1], task_id="c3", split="validation")]
    report = build_report(partnr, {"suite": "partnr", "planner": "partnr_expert", "noise": "off"})
    assert list(report["table3"]) == ["train", "validation", "test"]
    assert report["table3"]["validation"]["n"] == 1
    md = render_markdown(report)
    assert "## Table 3: train, validation and test split" in md
    table3 = md.split("## Table 3")[1].split("## Table 4")[0]
    assert [line.split(" | ")[1] for line in table3.splitlines() if line.startswith("| partnr_expert")] == [
        "train", "validation", "test"]
    _print_summary(json.loads(json.dumps(report)), None)  # the command line's table (homie eval, homie metrics)
    rows = [line.split("│")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert rows == ["all", "train", "validation", "test"]  # whole, in an 80-column terminal
    emmoe = build_report(scores, {"suite": "emmoe100", "planner": "expert", "noise": "off"})
    assert list(emmoe["table3"]) == ["train", "test"]
    assert "## Table 3: train and test split" in render_markdown(emmoe)

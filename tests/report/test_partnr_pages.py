"""PARTNR's results in the HTML reports (docs/reports.md): the evaluation page carries the same tables, PARTNR's
section included, with the same numbers as ``report.md``; its per-task table gives a PARTNR task its category,
PC and SR; every episode page shows the episode's PC.

A small evaluation: two PARTNR-style tasks of different categories with ``partnr_expert`` (one worker, no
images); one record's states are then cut short after its first rounds (as if the episode had stopped there
in PARTNR's eyes), so that PC and SR per category are not all 1.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest

from homiebot.report import write_report

pytest.importorskip("mujoco", reason="the episodes run on the MuJoCo simulator")

TASKS = ["partnr-7-000", "partnr-7-005"]  # constraint-free and temporal (tests/eval/partnr/test_partnr_eval.py)
CUT = "partnr-7-005"


@pytest.fixture(scope="module")
def partnr_evaluation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from homiebot.eval.runner import EvalSettings, run_evaluation, write_eval_report

    out = tmp_path_factory.mktemp("partnr_pages") / "eval"
    outcome = run_evaluation(EvalSettings(suite="partnr", planner="partnr_expert"), out, runs=1, workers=1,
                             split="test", task_ids=TASKS, progress=False)
    assert outcome.finished == len(TASKS) and not outcome.failed_jobs
    states = out / "episodes" / CUT / "run0" / "states.jsonl"
    states.write_text("".join(states.read_text().splitlines(keepends=True)[:3]))  # the start and two rounds
    write_eval_report(out, plots=False)  # report.md again, as homie metrics writes it
    return out


def _markdown_cells(markdown: str) -> list[str]:
    """Every cell of every table of a Markdown text, in order (separator rows left out)."""
    cells = []
    for line in markdown.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|(-+\|)+", line.strip()):
            cells += [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
    return cells


def _html_cells(fragment: str) -> list[str]:
    """Every cell (th, td) of every table of an HTML fragment, as text, in order."""
    cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", fragment, re.S)
    return [html_lib.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells]


def test_evaluation_page_has_the_markdown_report_partnr_tables_and_numbers(partnr_evaluation: Path) -> None:
    index, *episode_pages = write_report(partnr_evaluation, plots=False)
    markdown = (partnr_evaluation / "report.md").read_text()
    page = index.read_text()
    partnr_md = markdown.split("## PARTNR metrics", 1)[1]
    assert "| 2 | 50.0 |" in partnr_md  # two episodes, one of them a PARTNR failure after the cut
    tables = page.split('<section id="tables">', 1)[1].split("</section>", 1)[0]
    assert "PARTNR metrics (percent complete from the recorded states)" in tables
    # Every table cell of report.md, PARTNR's section included, is in the page's tables, in the same order.
    assert _html_cells(tables) == _markdown_cells(markdown)
    assert _markdown_cells(partnr_md)  # (and PARTNR's section has tables: PC, SR per category)
    assert "temporal" in tables and "constraint-free" in tables

    # The per-task table: a PARTNR task's category, mean PC and SR (its verdict), not EMMOE's attributes.
    per_task = page.split('<section id="tasks">', 1)[1].split("</section>", 1)[0]
    header = re.findall(r"<th[^>]*>(.*?)</th>", per_task)
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", per_task, re.S)[1:]:
        cells = _html_cells(row)
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    data = json.loads((partnr_evaluation / "report.json").read_text())["partnr"]
    categories = {r["task_id"]: r["category"] for r in data["rows"]}
    pcs = {r["task_id"]: r["pc"] for r in data["rows"]}
    for task_id in TASKS:
        row = rows[task_id]
        assert row["attributes / category"] == f"PARTNR: {categories[task_id]}"
        assert row["mean PC"] == f"{100 * pcs[task_id]:.2f}"
        assert row["SR"] == ("100.00" if pcs[task_id] == 1.0 else "0.00")
    assert rows[CUT]["mean PC"] != "100.00" and rows[CUT]["SR"] == "0.00"

    # Each episode page shows its PC and category, and the failure's explanation.
    for page_path in episode_pages:
        task_id = page_path.parent.parent.name
        text = page_path.read_text()
        assert f"<td>PC</td><td>{100 * pcs[task_id]:.2f}% (PARTNR category: {categories[task_id]})</td>" in text
        assert ("(failure)" in text.split("</title>")[0]) == (task_id == CUT)
    cut_page = (partnr_evaluation / "episodes" / CUT / "run0" / "report.html").read_text()
    assert "PARTNR explanation" in cut_page

"""PARTNR's metrics through ``homie eval`` / ``homie metrics``: every record keeps its states and evaluation
function, the report shows PC and PARTNR success beside SR, TP and the goal check, PC is recomputed from the
records alone, records without states are n/a (never 0), damaged state files name the record to delete.

Four tasks of the PARTNR-style suite's test split (one per category) and one EMMOE-100 task, on the real
simulator with the experts, one worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from homiebot.eval.metrics import EpisodeScore
from homiebot.eval.partnr.metrics import PartnrEpisode
from homiebot.eval.partnr.report import partnr_report, summary_line
from homiebot.eval.runner import EvalError, EvalSettings, run_evaluation, write_eval_report

pytest.importorskip("mujoco", reason="the episodes run on the MuJoCo simulator")

#: One task per PARTNR category in apartment 7 (constraint-free, spatial, temporal, heterogeneous).
PARTNR_TASKS = ["partnr-7-000", "partnr-7-003", "partnr-7-005", "partnr-7-007"]
HOMIE = str(Path(sys.executable).with_name("homie"))


@pytest.fixture(scope="module")
def partnr_eval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("partnr") / "eval"
    outcome = run_evaluation(EvalSettings(suite="partnr", planner="partnr_expert"), out, runs=1, workers=1,
                             split="test", task_ids=PARTNR_TASKS, progress=False)
    assert outcome.finished == len(PARTNR_TASKS) and not outcome.failed_jobs
    return out


@pytest.mark.slow
def test_partnr_suite_through_the_runner(partnr_eval: Path):
    out = partnr_eval
    # partnr_expert without noise is the suite's own PLWSR reference: no separate reference episodes.
    assert not (out / "reference").exists()
    for task_id in PARTNR_TASKS:
        record = out / "episodes" / task_id / "run0"
        lines = [json.loads(t) for t in (record / "states.jsonl").read_text().splitlines()]
        rounds = [json.loads(t) for t in (record / "rounds.jsonl").read_text().splitlines()]
        assert [line["round"] for line in lines] == list(range(len(rounds) + 1))
        assert lines[0]["sim_time"] == 0.0 and lines[-1]["sim_time"] > 0.0
        assert json.loads((record / "evaluation.json").read_text())["evaluation_propositions"]
    report = json.loads((out / "report.json").read_text())
    partnr = report["partnr"]
    assert partnr["episodes"] == 4 and partnr["unscored"] == []
    assert partnr["summary"]["pc"] == 1.0 and partnr["summary"]["sr"] == 1.0
    assert {c: v[1] for c, v in partnr["summary"]["sr_by_category"].items()} == {
        "constraint-free": 1, "spatial": 1, "temporal": 1, "heterogeneous": 1}
    assert partnr["agreement_sr"] == {"both": 4, "partnr_only": 0, "other_only": 0, "neither": 0}
    assert partnr["summary"]["sim_time_s"] > 0
    markdown = (out / "report.md").read_text()
    assert "## Table 2: overall" in markdown  # EMMOE's tables stay, PARTNR's come after them
    assert "| episodes | SR | TP | goal-check SR | PARTNR success | PC |" in markdown
    assert "| 4 | 100.0 | 100.0 | 100.0 | 100.0 | 100.0 |" in markdown
    assert (out / "partnr.md").read_text() in markdown


@pytest.mark.slow
def test_metrics_recomputes_pc_from_the_records_alone(partnr_eval: Path, tmp_path: Path):
    # A copy of the records only (no index, no report): homie metrics rebuilds PC from states.jsonl.
    out = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(partnr_eval), str(out)], check=True)
    for name in ("report.json", "report.md", "partnr.md", "partnr.json", "results.jsonl"):
        (out / name).unlink()
    done = subprocess.run([HOMIE, "metrics", str(out), "--no-plots"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "PARTNR (4 episodes with states): success 100.0%, PC 100.0%" in done.stdout
    assert json.loads((out / "report.json").read_text())["partnr"]["summary"]["pc"] == 1.0

    # A record from before the states were recorded: that episode is n/a, the others keep PC 1 (not 3/4).
    (out / "episodes" / "partnr-7-005" / "run0" / "states.jsonl").unlink()
    partnr = write_eval_report(out, plots=False)["partnr"]
    assert partnr["unscored"] == ["partnr-7-005/run0"]
    assert partnr["episodes"] == 3 and partnr["summary"]["pc"] == 1.0
    assert "3; 1 without: n/a" in (out / "report.md").read_text()

    # A damaged states file is named, not scored as 0.
    states = out / "episodes" / "partnr-7-007" / "run0" / "states.jsonl"
    states.write_text(states.read_text()[:-40])
    with pytest.raises(EvalError, match="partnr-7-007/run0"):
        write_eval_report(out, plots=False)


@pytest.mark.slow
def test_emmoe_evaluation_reports_pc_beside_sr(tmp_path: Path):
    out = tmp_path / "emmoe"
    run_evaluation(EvalSettings(suite="emmoe100", planner="expert"), out, runs=1, workers=1,
                   task_ids=["emmoe-084"], progress=False)
    partnr = json.loads((out / "report.json").read_text())["partnr"]
    assert partnr["episodes"] == 1 and partnr["summary"]["pc"] == 1.0
    assert partnr["beside"]["sr"] == 1.0 and partnr["beside"]["goal_sr"] == 1.0
    assert partnr["agreement_goal_check"]["both"] == 1


def _score(task_id: str, success: bool, tp: float, goal: bool | None) -> EpisodeScore:
    return EpisodeScore(task_id=task_id, run=0, seed=0, split="test", attributes=(), planner="p", rounds=3,
                        path_length=1.0, tp=tp, tp_exact="", tp_per_keypath=(), success=success,
                        goal_satisfied=goal, ended=True, replans=0, expert_rounds=None,
                        expert_path_length=None, plw=None, plw_path=None)


def _partnr(task_id: str, pc: float, goal_check: bool | None) -> PartnrEpisode:
    return PartnrEpisode(task_id=task_id, category="spatial", pc=pc, success=pc == 1.0, goal_check=goal_check,
                         ended=True, planning_cycles=3, path_length_m=1.0, sim_time_s=None,
                         extraneous_effort=None, exploration_rounds=None, explanation="",
                         explanation_kind="none" if pc == 1.0 else "missing steps")


def test_report_section_beside_and_agreement():
    pairs = [(_score("a", True, 1.0, True), _partnr("a", 1.0, True)),
             (_score("b", True, 1.0, True), _partnr("b", 0.5, True)),    # keypath done, a proposition missing
             (_score("c", False, 0.5, None), _partnr("c", 0.5, None))]   # no goal check
    section, data = partnr_report(pairs, ["d/run0"])
    assert data["agreement_sr"] == {"both": 1, "partnr_only": 0, "other_only": 1, "neither": 1}
    assert data["agreement_goal_check"] == {"both": 1, "partnr_only": 0, "other_only": 1, "neither": 0}
    assert data["beside"]["pc"] == pytest.approx(2 / 3) and data["beside"]["goal_sr"] == 1.0
    assert "| 3 | 66.7 | 83.3 | 100.0 | 33.3 | 66.7 |" in section
    assert "PARTNR success vs goal check" not in section  # one agreement table, not two
    assert "(3; 1 without: n/a)" in section and "disagree on: b/run0" in section
    assert data["unscored"] == ["d/run0"]


def test_report_section_without_states_is_na_not_zero():
    section, data = partnr_report([], ["a/run0", "b/run0"])
    assert data["summary"] is None and data["episodes"] == 0
    assert "n/a (2 episode record(s) without states.jsonl" in section
    assert "0.0" not in section
    assert summary_line(data) == "PARTNR: percent complete n/a (2 episode record(s) without states.jsonl)"


@pytest.mark.slow
def test_homie_run_record_keeps_states(tmp_path: Path):
    from homiebot.eval.partnr.recording import score_record

    out = tmp_path / "run"
    done = subprocess.run([HOMIE, "run", "--task", "partnr-7-007", "--planner", "partnr_expert", "--no-render",
                           "--no-report", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    episode = score_record(out)
    assert episode is not None and episode.pc == 1.0 and episode.category == "heterogeneous"
    assert episode.sim_time_s is not None and episode.sim_time_s > 0


@pytest.mark.slow
def test_free_text_run_record_keeps_states(tmp_path: Path):
    """A free-text instruction has no evaluation function, but its record keeps the state of every round (PC is
    n/a for it, never 0; a function can score the states later)."""
    from homiebot.eval.partnr.recording import score_record
    from homiebot.eval.partnr.states import EVALUATION_FILE, read_states

    out = tmp_path / "run"
    done = subprocess.run([HOMIE, "run", "pick up the apple", "--scene", "apartment_1", "--planner", "random",
                           "--max-rounds", "3", "--no-video", "--no-report", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    states = read_states(out)
    assert states is not None and len(states) == 4  # the state after the reset, then one per round
    assert not (out / EVALUATION_FILE).exists()
    assert score_record(out) is None


@pytest.mark.slow
@pytest.mark.parametrize("planner", [[], ["--planner", "expert"]], ids=["default", "expert"])
def test_partnr_eval_defaults_to_the_partnr_expert(tmp_path: Path, planner: list[str]):
    """Without --planner, and with --planner expert (the suite's expert, docs/partnr.md), `homie eval --suite partnr`
    runs the PARTNR expert (the goal expert cannot switch or clean): a task that must switch the microwave on
    succeeds."""
    out = tmp_path / "eval"
    done = subprocess.run([HOMIE, "eval", "--suite", "partnr", "--tasks", "partnr-1-022", *planner, "--runs", "1",
                           "--workers", "1", "--no-progress", "--no-report", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "eval.json").read_text())["settings"]["planner"] == {"name": "partnr_expert"}
    report = json.loads((out / "report.json").read_text())
    assert report["partnr"]["summary"]["sr"] == 1.0 and report["partnr"]["summary"]["pc"] == 1.0, report["partnr"]

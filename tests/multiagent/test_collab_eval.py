"""``homie eval --agents robot+human``: the collaboration evaluation end to end through the CLI (expert pair,
two tasks), its files, resume, its refusals; and the measures of one scored pair episode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HOMIE = [str(Path(sys.executable).with_name("homie"))]
TASKS = "partnr-6-007,partnr-6-010"  # lamp after the can (temporal, human-only skill); two objects to a stand
SOLO_TASK = "partnr-6-000"  # one object to move, no state change: the expert split gives the robot everything


def _homie(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*HOMIE, *args], capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["decentralized", "centralized"])
def test_expert_pair_evaluation_writes_tables_and_resumes(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "collab"
    args = ["eval", "--agents", "robot+human", "--mode", mode, "--suite", "partnr", "--split", "validation",
            "--tasks", TASKS, "--runs", "1", "--out", str(out)]
    done = _homie(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted((line["task_id"], line["kind"]) for line in lines) == [
        ("partnr-6-007", "pair"), ("partnr-6-007", "single"), ("partnr-6-010", "pair"), ("partnr-6-010", "single")]
    assert all(line["success"] and line["pc"] == 1.0 and line["error"] is None for line in lines)
    pairs = [line for line in lines if line["kind"] == "pair"]
    assert all(line["actions"]["robot"] > 0 and line["actions"]["human"] > 0 for line in pairs)
    assert all(line["task_offloading"] is not None and 0 < line["task_offloading"] < 1 for line in pairs)
    lamp = next(line for line in pairs if line["task_id"] == "partnr-6-007")
    single_lamp = next(line for line in lines if line["task_id"] == "partnr-6-007" and line["kind"] == "single")
    assert single_lamp["actions"]["human"] == 0 and lamp["sim_time_s"] > 0
    summary = json.loads((out / "collaboration.json").read_text())
    assert summary["pair"]["sr"]["mean"] == 1.0 and summary["pair_vs_single"]["episodes"] == 2
    report = (out / "report.md").read_text()
    assert "Table 2 layout" in report and "Table 12 layout" in report and f"{mode.capitalize()} pair" in report
    again = _homie(*args, cwd=tmp_path)
    assert again.returncode == 0 and "0 episode(s) run, 4 already done" in again.stdout
    other = _homie(*[a if a != mode else ("centralized" if mode == "decentralized" else "decentralized")
                     for a in args], cwd=tmp_path)
    assert other.returncode == 2 and other.stderr.strip().count("\n") == 0 and "other settings (mode)" in other.stderr


@pytest.mark.slow
def test_refusals_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "nothing"
    cases = [
        (["--agents", "robot+human", "--suite", "emmoe100"], "no PARTNR evaluation functions"),
        (["--agents", "robot+human", "--perception", "gt"], "--perception must be one of off, privileged"),
        (["--agents", "robot+human", "--images"], "does not take --images"),
        (["--agents", "robot+human", "--suite", "partnr", "--tasks", "partnr-9-999"], "unknown task id"),
        (["--agents", "robot+human", "--suite", "partnr", "--planner", "scripted"], "human only"),
        # The suite names homie eval takes (homiebot.tasks.suite.resolve_suite), refused for what they hold.
        (["--agents", "robot+human", "--suite", "emmoe"], "suite 'emmoe' has no PARTNR evaluation functions"),
        (["--agents", "robot+human", "--suite", "muep"], "holds ALFWorld's task types"),
        # A named task that is not a collaboration task is refused, naming it and why, not dropped.
        (["--agents", "robot+human", "--suite", "partnr", "--tasks", f"partnr-6-007,{SOLO_TASK}"],
         f"not a collaboration task (--agents runs only those): {SOLO_TASK}: the expert split gives the robot"),
    ]
    for extra, message in cases:
        done = _homie("eval", *extra, "--out", str(out), cwd=tmp_path)
        assert done.returncode == 2, (extra, done.stderr)
        assert message in done.stderr and done.stderr.strip().count("\n") == 0
        assert not out.exists()


@pytest.mark.slow
def test_metrics_recomputes_a_collaboration_folder_from_its_records(tmp_path: Path) -> None:
    out = tmp_path / "collab"
    done = _homie("eval", "--agents", "robot+human", "--suite", "partnr", "--tasks", "partnr-6-010", "--runs", "1",
                  "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = (out / "report.md").read_text()
    summary = json.loads((out / "collaboration.json").read_text())
    (out / "report.md").unlink()
    (out / "collaboration.json").unlink()
    again = _homie("metrics", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (out / "report.md").read_text() == report and again.stdout.strip() == report.strip()
    assert json.loads((out / "collaboration.json").read_text()) == summary
    as_json = _homie("metrics", str(out), "--json", cwd=tmp_path)
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == summary
    elsewhere = tmp_path / "elsewhere"
    beside = _homie("metrics", str(out), "--out", str(elsewhere), cwd=tmp_path)
    assert beside.returncode == 0 and (elsewhere / "report.md").read_text() == report


def test_report_of_a_run_whose_single_agent_never_acted() -> None:
    # SmolLM2's single agent can spend every round on F1 answers: no simulated time. The report says the ratio is
    # undefined instead of failing after the episodes were written.
    from homiebot.config.collaboration import CollaborationConfig
    from homiebot.multiagent.evaluate import report_markdown, summarize

    def line(kind: str, sim_time: float) -> dict:
        return {"task_id": "partnr-6-w03", "category": "heterogeneous", "run": 0, "kind": kind, "success": False,
                "pc": 0.0, "rounds": 6, "sim_time_s": sim_time, "actions": {"robot": 6, "human": 6 if kind == "pair" else 0},
                "successful_actions": {"robot": 0, "human": 0}, "planning_cycles": 6, "task_offloading": None,
                "extraneous_effort": None, "exploration_actions": None, "steps": [], "ended": False, "error": None,
                "wall_s": 1.0}

    summary = summarize([line("pair", 24.0), line("single", 0.0)])
    assert summary["pair_vs_single"]["sim_time_ratio"] is None
    settings = CollaborationConfig(suite="partnr", mode="centralized", planner_robot="react", planner_human="react")
    report = report_markdown(settings, summary, 1, 1)
    assert "simulated time n/a (the single agent's total is 0)" in report and "rounds x1.00" in report


def test_a_run_of_the_bundled_model_pins_its_runtime() -> None:
    from homiebot.config.collaboration import CollaborationConfig
    from homiebot.multiagent.evaluate import pinned_settings
    from homiebot.planner.models import text_runtime_defaults

    experts = CollaborationConfig.from_options(options={}, suite="partnr", planner_robot="expert", planner_human="expert")
    assert "model_runtime" not in pinned_settings(experts)
    react = CollaborationConfig.from_options(options={"model": "smollm2"}, suite="partnr", mode="centralized",
                                             planner_robot="react", planner_human="react")
    pinned = pinned_settings(react)
    assert pinned["model_runtime"] == text_runtime_defaults()
    # The options are the ReAct planner's, typed: a number given as text is a number in settings.json.
    assert pinned["model_planner"]["name"] == "react" and pinned["model_planner"]["model"] == "smollm2"


def test_the_pair_options_are_typed_and_refused_in_one_line() -> None:
    from homiebot.config.collaboration import CollaborationConfig
    from homiebot.config.planners import ConfigError

    typed = CollaborationConfig.from_options(options={"max_llm_calls": "7"}, suite="partnr",
                                             planner_robot="react", planner_human="react")
    assert typed.model_planner is not None and typed.model_planner.options()["max_llm_calls"] == 7
    assert typed.given_options() == {"max_llm_calls": 7}
    with pytest.raises(ConfigError, match="planner .react.: nope: unknown option"):
        CollaborationConfig.from_options(options={"nope": "1"}, suite="partnr", planner_robot="react",
                                         planner_human="react")
    with pytest.raises(ConfigError, match="no planner of the pair takes options"):
        CollaborationConfig.from_options(options={"model": "x"}, suite="partnr")
    with pytest.raises(ConfigError, match="one model planner"):
        CollaborationConfig.from_options(options={}, suite="partnr", planner_robot="react", planner_human="random")
    scripted = CollaborationConfig.from_options(options={"script": "Go to, sofa; Turn on, floor_lamp"},
                                                suite="partnr", planner_human="scripted")
    assert scripted.human_script == ("Go to, sofa", "Turn on, floor_lamp") and scripted.model_planner is None
    with pytest.raises(ConfigError, match="scripted human"):
        CollaborationConfig.from_options(options={"script": "Go to, sofa"}, suite="partnr")

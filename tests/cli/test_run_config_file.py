"""``homie run --config FILE``: an evaluation's ``eval.json`` or a record's ``summary.json`` keeps the run
configuration (homiebot/config/run.py), and a run from it repeats that setting; the command line's options win
(docs/cli.md, "--config")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.eval.manifest import EvalSettings, prepare_manifest, select_tasks

TASK = "emmoe-084"


@pytest.fixture()
def homie():
    runner = CliRunner()
    app = build_app()

    def invoke(*args: str) -> dict[str, object]:
        result = runner.invoke(app, [*args, "--no-render", "--no-report"])
        assert result.exit_code == 0, result.output
        out = Path(args[args.index("--out") + 1])
        summary: dict[str, object] = json.loads((out / "summary.json").read_text())
        return summary

    return invoke


def _episode(summary: dict[str, object]) -> tuple[object, ...]:
    return summary["subtasks"], summary["error_codes"], summary["feedback"], summary["success"]


@pytest.fixture()
def evaluation(tmp_path: Path) -> Path:
    """An evaluation directory's eval.json with a setting that differs from every default: the expert with
    another reach, EMMOE's noise and a shorter round limit."""
    settings = EvalSettings(suite="emmoe100", planner="expert", planner_options={"interact_range_m": 1.2},
                            noise="emmoe", max_rounds=12)
    out = tmp_path / "runs" / "X"
    out.mkdir(parents=True)
    prepare_manifest(out, settings, select_tasks("emmoe100", task_ids=[TASK]))
    return out / "eval.json"


def test_a_run_from_eval_json_repeats_the_evaluations_setting(homie, evaluation: Path, tmp_path: Path) -> None:
    pinned = json.loads(evaluation.read_text())["run"]
    assert pinned["planner"] == {"name": "expert", "interact_range_m": 1.2, "near_threshold_m": 0.1,
                                 "far_threshold_m": 2.0, "close_opened": True}
    # The evaluation's episodes neither render nor keep views or pages, and the file says so.
    assert pinned["simulator"]["render"] is False
    assert pinned["recording"] == {"images": False, "video": False, "report": False}
    replayed = homie("run", "--config", str(evaluation), "--task", TASK, "--seed", "1", "--out", str(tmp_path / "a"))
    assert replayed["run"] == {**pinned, "task": TASK, "seed": 1}
    by_flags = homie("run", "--task", TASK, "--seed", "1", "--noise", "emmoe", "--max-rounds", "12",
                     "-p", "interact_range_m=1.2", "--no-video", "--out", str(tmp_path / "b"))
    assert by_flags["run"] == {**replayed["run"], "recording": {**replayed["run"]["recording"], "images": None}}
    assert _episode(by_flags) == _episode(replayed)
    assert "E2" in replayed["error_codes"]  # the noise is on: the setting is not the defaults'


def test_the_command_line_wins_over_the_file(homie, evaluation: Path, tmp_path: Path) -> None:
    overridden = homie("run", "--config", str(evaluation), "--task", TASK, "--max-rounds", "3", "--noise", "off",
                       "-p", "close_opened=false", "--out", str(tmp_path / "c"))
    run = overridden["run"]
    assert run["max_rounds"] == 3 and run["skills"] == {"mode": "oracle", "noise": "off"}
    assert run["planner"]["interact_range_m"] == 1.2 and run["planner"]["close_opened"] is False  # merged
    assert overridden["num_rounds"] == 3
    other = homie("run", "--config", str(evaluation), "--task", TASK, "--planner", "partnr_expert", "--out",
                  str(tmp_path / "d"))
    assert other["run"]["planner"] == {"name": "partnr_expert"}  # another planner: its own options, not the file's


def test_an_eval_json_from_before_runs_were_kept_gives_its_settings(homie, evaluation: Path, tmp_path: Path) -> None:
    manifest = json.loads(evaluation.read_text())
    manifest["settings"] = {"suite": "emmoe100", "planner": "expert", "planner_options": {"interact_range_m": 1.2},
                            "noise": "emmoe", "max_rounds": 12}  # the name-and-options form, no run
    del manifest["run"]
    old = tmp_path / "old-eval.json"
    old.write_text(json.dumps(manifest))
    from_old = homie("run", "--config", str(old), "--task", TASK, "--seed", "1", "--out", str(tmp_path / "o"))
    from_new = homie("run", "--config", str(evaluation), "--task", TASK, "--seed", "1", "--out", str(tmp_path / "n"))
    assert from_old["run"] == from_new["run"] and _episode(from_old) == _episode(from_new)


def test_the_recovery_planner_named_with_its_base(homie, tmp_path: Path) -> None:
    """``--planner recovery -p base=NAME -p base_options=...`` (docs/recovery.md) is the wrapper's configuration
    holding the base's, and its record repeats it."""
    first = homie("run", "--task", TASK, "--planner", "recovery", "-p", "base=expert", "-p",
                  'base_options={"interact_range_m": 1.2}', "-p", "mode=none", "--out", str(tmp_path / "w"))
    planner = first["run"]["planner"]
    assert planner["name"] == "recovery" and planner["mode"] == "none"
    assert planner["base"]["name"] == "expert" and planner["base"]["interact_range_m"] == 1.2
    again = homie("run", "--config", str(tmp_path / "w" / "summary.json"), "--out", str(tmp_path / "w2"))
    assert again["run"] == first["run"] and _episode(again) == _episode(first)


def test_a_record_repeats_itself(homie, tmp_path: Path) -> None:
    first = homie("run", "--task", TASK, "--seed", "2", "--noise", "emmoe", "--out", str(tmp_path / "first"))
    again = homie("run", "--config", str(tmp_path / "first" / "summary.json"), "--out", str(tmp_path / "again"))
    assert again["run"] == first["run"] and again["task"] == TASK
    assert _episode(again) == _episode(first)


@pytest.mark.parametrize(("planner", "inject"), [("perturbed-expert", 0.6), ("expert", 0.0)])
def test_a_collected_training_record_repeats_itself(homie, tmp_path: Path, planner: str, inject: float) -> None:
    """``homie data collect``'s records name their training expert (``perturbed-expert`` with its ``inject``, or
    ``prompt-bound-expert`` for ``--planner expert``), a planner of the registry: ``homie run --config`` repeats the
    episode, the injected wrong subtasks included (they are drawn from the task and the seed)."""
    from homiebot.training.collect import collect_episodes

    collect_episodes(tmp_path / "data", planner=planner, split="all", task_ids=[TASK], seed_offset=12, inject=inject)
    record = tmp_path / "data" / "episodes" / TASK / "run0" / "summary.json"
    collected = json.loads(record.read_text())
    named = {"perturbed-expert": "perturbed-expert", "expert": "prompt-bound-expert"}[planner]
    assert collected["run"]["planner"]["name"] == named and collected["run"]["seed"] == 12
    again = homie("run", "--config", str(record), "--out", str(tmp_path / "again"))
    assert again["run"]["planner"] == collected["run"]["planner"] and again["seed"] == 12
    assert _episode(again) == _episode(collected)
    if inject:  # the injected decision errors (L1-L4, D1) are repeated, not only the expert's plan
        assert {"L1", "L2", "L3", "L4", "D1"} & set(again["error_codes"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{", "invalid JSON"),
    ('{"tasks": {}}', "holds no run configuration"),
    ('{"settings": {"planner": "nope"}}', "its settings do not validate"),
    ('{"run": {"task": "emmoe-084", "planner": {"name": "expert", "reach": 1}}}', "does not take option(s) reach"),
    ('{"run": {"task": "emmoe-084", "planner": {"name": "expert"}, "simulator": {"backnd": "x"}}}',
     "simulator.backnd: unknown option"),
    ('{"run": {"task": "emmoe-084", "planner": {"name": "expert"}, "max_rounds": 0}}', "max_rounds: Input should be"),
])
def test_a_bad_config_file_is_one_line_and_writes_nothing(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "eval.json"
    if content is not None:
        path.write_text(content)
    result = CliRunner().invoke(build_app(), ["run", "--config", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_evaluation_episode_replays_from_its_record(homie, tmp_path: Path) -> None:
    """Each record of an evaluation keeps the configuration its worker built it from: homie run repeats the
    episode from the record alone."""
    from homiebot.eval.runner import run_evaluation

    settings = EvalSettings(suite="emmoe100", planner="expert", noise="emmoe", max_rounds=15)
    run_evaluation(settings, tmp_path / "ev", runs=2, workers=1, task_ids=[TASK], progress=False)
    record = tmp_path / "ev" / "episodes" / TASK / "run1" / "summary.json"
    original = json.loads(record.read_text())
    assert original["run"]["task"] == TASK and original["run"]["seed"] == 1
    assert original["run"]["skills"] == {"mode": "oracle", "noise": "emmoe"} and original["run"]["max_rounds"] == 15
    replayed = homie("run", "--config", str(record), "--out", str(tmp_path / "again"))
    assert _episode(replayed) == _episode(original)


def _without_episode(run: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in run.items() if key not in ("task", "seed")}


@pytest.mark.slow
@pytest.mark.parametrize(("planner", "renders"), [("expert", False), ("random", True)])
def test_an_evaluations_run_is_what_its_episodes_ran(tmp_path: Path, planner: str, renders: bool) -> None:
    """eval.json's ``run`` is the configuration every episode of the evaluation was built from (its record's
    ``run`` apart from the task and the seed): the simulator renders only when the episodes read the views (the
    random planner reads their segmentation) or the records keep them, so ``homie run --config`` repeats it; the
    PLWSR reference episodes' records hold the reference setting (the suite's expert, rendering nothing)."""
    from homiebot.eval.runner import run_evaluation

    settings = EvalSettings(suite="emmoe100", planner=planner, noise="emmoe", max_rounds=3)
    out = tmp_path / "ev"
    run_evaluation(settings, out, runs=1, workers=1, task_ids=[TASK], progress=False, report=False)
    pinned = json.loads((out / "eval.json").read_text())["run"]
    record = json.loads((out / "episodes" / TASK / "run0" / "summary.json").read_text())["run"]
    assert (pinned["task"], pinned["seed"]) == (None, 0) and (record["task"], record["seed"]) == (TASK, 0)
    assert _without_episode(record) == _without_episode(pinned)
    assert pinned["simulator"]["render"] is renders
    assert pinned["recording"] == {"images": False, "video": False, "report": False}
    reference = json.loads((out / "reference" / TASK / "run0" / "summary.json").read_text())["run"]
    assert _without_episode(reference) == _without_episode(settings.reference_run_config().dump()) == {
        **_without_episode(pinned), "planner": {"name": "expert", "interact_range_m": 1.0, "near_threshold_m": 0.1,
                              "far_threshold_m": 2.0, "close_opened": True},
        "skills": {"mode": "oracle", "noise": "off"}, "simulator": {**pinned["simulator"], "render": False}}


@pytest.mark.slow
def test_a_resume_keeping_other_views_rewrites_the_run(tmp_path: Path) -> None:
    """eval.json's ``run`` follows the command that runs episodes into the directory: a directory started without
    views and resumed with ``--video`` says the simulator renders and the records keep a video."""
    from homiebot.eval.runner import run_evaluation

    settings = EvalSettings(suite="emmoe100", planner="expert", max_rounds=2)
    out = tmp_path / "ev"
    run_evaluation(settings, out, runs=1, workers=1, task_ids=[TASK], progress=False, report=False)
    first = json.loads((out / "eval.json").read_text())["run"]
    assert first["simulator"]["render"] is False and first["recording"]["video"] is False
    run_evaluation(settings, out, runs=2, workers=1, task_ids=[TASK], progress=False, report=False, video=True)
    resumed = json.loads((out / "eval.json").read_text())["run"]
    record = json.loads((out / "episodes" / TASK / "run1" / "summary.json").read_text())["run"]
    assert _without_episode(record) == _without_episode(resumed)
    assert resumed["simulator"]["render"] is True and resumed["recording"] == {**first["recording"], "video": True}
    assert (out / "episodes" / TASK / "run1" / "episode.mp4").is_file()

"""``--articulation oracle|physical`` on ``homie run`` and ``homie eval``: how ``--skills physical`` opens and closes
doors and drawers reaches the episode's skill set and is kept in the record (docs/robots.md, "Physical skills: Open
and Close through the arm"); a wrong value, or the option without ``--skills physical``, is one line and exit 2 with
nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homiebot.agent.build import build_episode
from homiebot.cli import build_app
from homiebot.config.run import RunConfig
from homiebot.skills.physical import skillset

TASK = "emmoe-005"  # a drawer opened and closed


@pytest.mark.parametrize("articulation", ["oracle", "physical", None])
def test_the_setting_reaches_the_physical_skill_set(articulation):
    skills = {"mode": "physical", **({"articulation": articulation} if articulation else {})}
    episode = build_episode(RunConfig.model_validate({"task": TASK, "skills": skills, "simulator": {"render": False}}))
    try:
        assert episode.skills is not None
        made = episode.skills(episode.simulator, 0)
        assert made.articulation_mode == (articulation or skillset.ARTICULATION)  # type: ignore[attr-defined]
    finally:
        episode.close()


def test_the_setting_needs_the_physical_skills():
    with pytest.raises(ValueError, match="articulation is a setting of the physical skills"):
        RunConfig.model_validate({"task": TASK, "skills": {"mode": "oracle", "articulation": "physical"}})


def test_homie_run_keeps_the_setting_in_the_record(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(build_app(), ["run", "--task", TASK, "--skills", "physical", "--articulation", "oracle",
                                              "--out", str(out), "--no-render", "--no-report"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success"] is True
    assert summary["run"]["skills"] == {"mode": "physical", "noise": "off", "articulation": "oracle"}


@pytest.mark.parametrize(("args", "message"), [
    (["--skills", "physical", "--articulation", "arm"], "--articulation 'arm': use oracle or physical"),
    (["--articulation", "physical"], "--articulation needs --skills physical"),
])
def test_a_wrong_articulation_is_one_line_and_writes_nothing(tmp_path: Path, args, message):
    for command in (["run", "--task", TASK], ["eval", "--suite", "emmoe", "--tasks", TASK, "--runs", "1"]):
        out = tmp_path / command[0]
        result = CliRunner().invoke(build_app(), [*command, *args, "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert not out.exists()


# The setting as the skill set uses it is what the record and eval.json keep, also when the command gave none, so
# that an evaluation started before the default changed (2026-11-30) and resumed after cannot mix settings silently.


@pytest.mark.parametrize("default", ["oracle", "physical"])
def test_the_record_keeps_the_default_the_skill_set_uses_when_none_is_given(tmp_path: Path, monkeypatch, default):
    monkeypatch.setattr(skillset, "ARTICULATION", default)
    config = RunConfig.model_validate({"task": TASK, "skills": {"mode": "physical"}, "simulator": {"render": False}})
    episode = build_episode(config, out=tmp_path / "record")
    try:
        assert episode.recorder is not None
        assert episode.recorder.run["skills"] == {"mode": "physical", "noise": "off", "articulation": default}
        made = episode.skills(episode.simulator, 0)  # type: ignore[misc]
        assert made.articulation_mode == default  # type: ignore[attr-defined]
    finally:
        episode.close()
    oracle = build_episode(RunConfig.model_validate({"task": TASK, "simulator": {"render": False}}),
                           out=tmp_path / "oracle")
    try:  # the oracle skills have no such setting
        assert oracle.recorder is not None and oracle.recorder.run["skills"] == {"mode": "oracle", "noise": "off"}
    finally:
        oracle.close()


def test_eval_settings_pin_the_default_with_the_physical_skills_only(monkeypatch):
    from homiebot.eval.manifest import EvalSettings

    monkeypatch.setattr(skillset, "ARTICULATION", "oracle")
    assert EvalSettings(skills="physical").model_dump(mode="json")["articulation"] == "oracle"
    assert EvalSettings(skills="physical").run_config().dump()["skills"]["articulation"] == "oracle"
    assert EvalSettings(skills="physical", articulation="physical").articulation == "physical"
    assert "articulation" not in EvalSettings().model_dump(mode="json")


def _started(out: Path, monkeypatch, default: str | None, episodes: bool = True) -> None:
    """An evaluation directory of the physical skills started when the skill set's default was ``default``; None:
    started before eval.json pinned the setting (its settings without ``articulation``)."""
    from homiebot.eval.manifest import EvalSettings, prepare_manifest, select_tasks

    monkeypatch.setattr(skillset, "ARTICULATION", default or "oracle")
    prepare_manifest(out, EvalSettings(skills="physical"), select_tasks("emmoe100", task_ids=[TASK]))
    if default is None:
        manifest = json.loads((out / "eval.json").read_text())
        del manifest["settings"]["articulation"]
        (out / "eval.json").write_text(json.dumps(manifest))
    if episodes:
        (out / "episodes" / TASK / "run0").mkdir(parents=True)
        (out / "episodes" / TASK / "run0" / "summary.json").write_text("{}")


def test_a_resume_after_the_default_changed_is_refused_in_one_line(tmp_path: Path, monkeypatch):
    out = tmp_path / "eval"
    _started(out, monkeypatch, "oracle")
    monkeypatch.setattr(skillset, "ARTICULATION", "physical")
    args = ["eval", "--suite", "emmoe", "--tasks", TASK, "--runs", "1", "--workers", "1", "--no-images",
            "--skills", "physical", "--out", str(out)]
    refused = CliRunner().invoke(build_app(), args)
    assert refused.exit_code == 2, refused.output
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1, refused.output
    assert "articulation: 'oracle' there, 'physical' now); resume it with --articulation oracle" in lines[0]
    assert json.loads((out / "eval.json").read_text())["settings"]["articulation"] == "oracle"


def test_a_directory_that_does_not_record_the_setting_resumes_only_when_told(tmp_path: Path, monkeypatch):
    from homiebot.eval.manifest import EvalError, EvalSettings, prepare_manifest, select_tasks

    tasks = select_tasks("emmoe100", task_ids=[TASK])
    out = tmp_path / "eval"
    _started(out, monkeypatch, None)
    monkeypatch.setattr(skillset, "ARTICULATION", "physical")
    with pytest.raises(EvalError, match="do not record how Open and Close ran .* resume with --articulation oracle "
                                        "or --articulation physical as they ran"):
        prepare_manifest(out, EvalSettings(skills="physical"), tasks)
    assert "articulation" not in json.loads((out / "eval.json").read_text())["settings"]
    # Named on the command line, the setting is taken for the episodes' and pinned.
    prepare_manifest(out, EvalSettings(skills="physical", articulation="oracle"), tasks, articulation_given=True)
    assert json.loads((out / "eval.json").read_text())["settings"]["articulation"] == "oracle"
    with pytest.raises(EvalError, match="articulation: 'oracle' there, 'physical' now"):
        prepare_manifest(out, EvalSettings(skills="physical"), tasks)
    # Without a finished episode nothing can mix: this run's setting is pinned.
    empty = tmp_path / "empty"
    _started(empty, monkeypatch, None, episodes=False)
    monkeypatch.setattr(skillset, "ARTICULATION", "physical")
    prepare_manifest(empty, EvalSettings(skills="physical"), tasks)
    assert json.loads((empty / "eval.json").read_text())["settings"]["articulation"] == "physical"

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

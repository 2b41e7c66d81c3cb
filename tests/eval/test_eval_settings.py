"""EvalSettings' planner is its typed configuration (homiebot/config/planners.py): eval.json keeps it whole, and the
eval.json of a directory started when the planner was a name beside an options dict still resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homiebot.config.planners import ExpertPlannerConfig, RecoveryPlannerConfig
from homiebot.eval.manifest import EVAL_FILE, EvalError, EvalSettings, prepare_manifest, select_tasks

OLD_FORM = {"suite": "emmoe100", "planner": "recovery", "noise": "emmoe", "max_rounds": 20, "backend": "mujoco",
            "perception": "off", "model_runtime": None,
            "planner_options": {"base": "expert", "base_options": {"interact_range_m": 1.2}, "mode": "cmfr",
                                "stages": [1, 2]}}


def test_the_old_form_reads_as_the_typed_planner() -> None:
    settings = EvalSettings.model_validate(OLD_FORM)
    assert isinstance(settings.planner, RecoveryPlannerConfig)
    assert settings.planner.base == ExpertPlannerConfig(interact_range_m=1.2) and settings.planner.stages == (1, 2)
    assert EvalSettings.model_validate(settings.model_dump(mode="json")) == settings
    # The report's setting table shows what differs from the defaults, the base by name.
    assert settings.planner_options == {"base": {"name": "expert", "interact_range_m": 1.2}, "stages": [1, 2]}
    assert settings.label() == "recovery planner, noise emmoe"


def test_the_expert_as_it_comes_is_its_own_reference() -> None:
    assert EvalSettings().self_reference
    assert EvalSettings(planner="expert", planner_options={"interact_range_m": 1.0}).self_reference  # the default
    assert not EvalSettings(planner="expert", planner_options={"interact_range_m": 1.2}).self_reference


def test_a_directory_started_with_the_old_form_resumes(tmp_path: Path) -> None:
    tasks = select_tasks("emmoe100", task_ids=["emmoe-084"])
    (tmp_path / EVAL_FILE).write_text(json.dumps({"format_version": 1, "settings": OLD_FORM, "tasks": {},
                                                  "names": {}}))
    manifest = prepare_manifest(tmp_path, EvalSettings.model_validate(OLD_FORM), tasks)
    assert manifest["run"]["planner"]["base"]["interact_range_m"] == 1.2  # the run configuration, added
    other = {**OLD_FORM, "planner_options": {**OLD_FORM["planner_options"], "stages": [1]}}
    with pytest.raises(EvalError, match="another setting"):
        prepare_manifest(tmp_path, EvalSettings.model_validate(other), tasks)


def test_an_unknown_option_is_refused_by_the_planners_class() -> None:
    with pytest.raises(ValueError, match="unknown option"):
        EvalSettings(planner="expert", planner_options={"reach": 2})

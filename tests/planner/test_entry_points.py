"""Planners and simulators from an outside package, found through the ``homiebot.planners`` and
``homiebot.simulators`` entry points (homiebot/plugins.py): the test builds a small package, installs it with pip
into a folder of its own (never into the shared environment), and runs an episode with its planner on its
simulator in a process that has the folder on its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "homie_plugin_fixture"

PYPROJECT = f"""\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "homie-plugin-fixture"
version = "0.0.1"

[project.entry-points."homiebot.planners"]
walk_then_end = "{PACKAGE}:WalkThenEnd"
walk_n = "{PACKAGE}:WalkN"
expert = "{PACKAGE}:WalkThenEnd"
not_a_planner = "{PACKAGE}:NotAPlanner"
malformed = "{PACKAGE}.WalkThenEnd"

[project.entry-points."homiebot.simulators"]
counting_mujoco = "{PACKAGE}:CountingSimulator"

[tool.setuptools]
packages = ["{PACKAGE}"]
"""

MODULE = """\
from typing import Literal

from pydantic import Field

from homiebot.config.planners import PlannerConfig
from homiebot.planner.base import Planner
from homiebot.sim.mujoco.backend import MujocoSimulator


class WalkThenEnd(Planner):
    name = "walk_then_end"

    def plan(self, request):
        if request.round_index == 1:
            return "Analysis: go.\\nSubtask: [Go to, fridge]\\nModel: NoMaD"
        return "Analysis: done.\\nSubtask: [End]\\nModel: None"


class WalkNConfig(PlannerConfig):
    name: Literal["walk_n"] = "walk_n"
    steps: int = Field(1, ge=1)


class WalkN(Planner):
    \"\"\"Goes to the fridge ``steps`` times, then ends; brings its own configuration class.\"\"\"

    name = "walk_n"
    config_class = WalkNConfig

    def __init__(self, steps=1):
        self.steps = steps

    def plan(self, request):
        if request.round_index <= self.steps:
            return "Analysis: go.\\nSubtask: [Go to, fridge]\\nModel: NoMaD"
        return "Analysis: done.\\nSubtask: [End]\\nModel: None"


class NotAPlanner:
    pass


class CountingSimulator(MujocoSimulator):
    resets = 0

    def reset(self, scene, seed=0):
        CountingSimulator.resets += 1
        return super().reset(scene, seed=seed)
"""

SCRIPT = """\
import json
from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.tasks.suite import get_task
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.registry import PlannerError, available_planners, make_planner, planner_class
from homiebot.sim.base import available_backends, make_simulator

sim = make_simulator("counting_mujoco", render=False)
trajectory = run_episode(sim, make_planner("walk_then_end"), task=get_task("demo-green-can"),
                         config=EpisodeConfig(render=False))
resets = type(sim).resets
errors = {}
for name in ("not_a_planner", "malformed"):
    try:
        planner_class(name)
    except PlannerError as err:
        errors[name] = str(err)
# Through the run configuration and the build path (homie run's): the package's own configuration class types
# and checks the options; a planner without one is configured from its constructor.
from homiebot.agent.build import build_episode
from homiebot.config.planners import ConfigError
from homiebot.config.run import run_config

built = build_episode(run_config({"task": "demo-green-can", "planner": {"name": "walk_n", "steps": "2"},
                                  "simulator": {"backend": "counting_mujoco", "render": False}}), simulator=sim).run()
try:
    run_config({"task": "demo-green-can", "planner": {"name": "walk_n", "steps": 0}})
except ConfigError as err:
    errors["walk_n"] = str(err)
plain = run_config({"task": "demo-green-can", "planner": {"name": "walk_then_end"}}).dump()["planner"]
print(json.dumps({
    "built_rounds": [r.subtask_text for r in built.rounds], "plain": plain,
    "rounds": [r.subtask_text for r in trajectory.rounds], "codes": [r.feedback.code.value for r in trajectory.rounds],
    "resets": resets, "planners": available_planners(), "backends": available_backends(),
    "expert_is_builtin": planner_class("expert") is ExpertPlanner, "errors": errors,
}))
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plugin")
    source = root / "src"
    (source / PACKAGE).mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / PACKAGE / "__init__.py").write_text(MODULE)
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(source)], check=True, capture_output=True, text=True)
    assert list(site.glob("homie_plugin_fixture-0.0.1.dist-info/entry_points.txt"))
    return site


@pytest.mark.slow
def test_an_installed_package_adds_a_planner_and_a_simulator(plugin_site: Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=False,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["rounds"] == ["[Go to, fridge]", "[End]"] and got["codes"] == ["OK", "OK"]
    assert got["resets"] == 1  # the episode ran on the package's simulator
    assert "walk_then_end" in got["planners"] and "counting_mujoco" in got["backends"]
    # A package cannot replace a built-in name; a malformed target is skipped; a class that is not a Planner is
    # refused by name.
    assert got["expert_is_builtin"] and "malformed" not in got["planners"]
    assert "not a homiebot.planner.base.Planner subclass" in got["errors"]["not_a_planner"]
    assert "unknown planner 'malformed'" in got["errors"]["malformed"]
    assert "'expert'" in result.stderr and "the name is built in" in result.stderr
    # A package's planner with its own configuration class, through the run configuration and the build path.
    assert got["built_rounds"] == ["[Go to, fridge]", "[Go to, fridge]", "[End]"]
    assert "planner.steps: Input should be greater than or equal to 1" in got["errors"]["walk_n"]
    assert got["plain"] == {"name": "walk_then_end"}


def test_without_the_package_the_names_are_unknown():
    from homiebot.planner.registry import PlannerError, available_planners, make_planner
    from homiebot.sim.base import make_simulator

    assert "walk_then_end" not in available_planners()
    with pytest.raises(PlannerError, match="unknown planner 'walk_then_end'"):
        make_planner("walk_then_end")
    with pytest.raises(ValueError, match="unknown simulator backend 'counting_mujoco'"):
        make_simulator("counting_mujoco")


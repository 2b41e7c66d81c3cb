"""One list of suite names and one resolver for every command's ``--suite`` (homiebot/tasks/suite.py): a name that
``homie eval`` takes, ``homie tasks`` takes too, and an unknown name is refused in one line with the list."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.eval.muep_suite import load_suite as load_muep_suite
from homiebot.tasks.suite import MUEP_SUITE, TaskError, load_suite, resolve_suite, suite_names

runner = CliRunner()


def _ids(*args: str) -> list[str]:
    done = runner.invoke(build_app(), ["tasks", *args])
    assert done.exit_code == 0, done.output
    return done.output.split()


def test_every_suite_name_resolves_and_the_alias_is_the_suite() -> None:
    assert {"emmoe", "emmoe100", "demo", "partnr", "muep"} <= set(suite_names())
    assert {resolve_suite(name) for name in suite_names()} == {"emmoe100", "demo", "partnr", MUEP_SUITE}
    assert load_suite("emmoe") is load_suite("emmoe100")
    with pytest.raises(TaskError, match="unknown suite 'emoe'; available: demo, emmoe, emmoe100, muep, partnr"):
        resolve_suite("emoe")
    with pytest.raises(TaskError, match="homie eval --suite muep"):
        load_suite("muep")


def test_tasks_takes_the_names_eval_takes() -> None:
    emmoe = _ids("--suite", "emmoe")
    assert emmoe == _ids("--suite", "emmoe100") and len(emmoe) == 100 and emmoe[0] == "emmoe-001"
    assert _ids("--suite", "muep") == [task.id for task in load_muep_suite()]
    assert len(_ids("--suite", "partnr")) == len(load_suite("partnr").tasks)
    everything = _ids()
    assert set(emmoe) <= set(everything) and not any(task_id.startswith("muep-") for task_id in everything)


def test_an_unknown_suite_is_one_line_naming_every_suite() -> None:
    done = runner.invoke(build_app(), ["tasks", "--suite", "emoe"])
    assert done.exit_code == 2
    assert done.output.strip() == "error: unknown suite 'emoe'; available: demo, emmoe, emmoe100, muep, partnr"

"""Held-out seeds stay held out: every collection of training data (``homie data collect --suite emmoe|partnr|muep``,
``homie data corrections``, DAgger's student) refuses a scene seed that the evaluation of *any* suite plays, from the
one table of :mod:`homiebot.tasks.reserved`, with one line naming the suite whose seed it is."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.eval.muep_collect import CollectionError
from homiebot.eval.muep_collect import check_seeds as check_muep_seeds
from homiebot.eval.muep_suite import load_suite as load_muep_suite
from homiebot.tasks import reserved
from homiebot.tasks.reserved import EVALUATION_RUNS, evaluation_suites, reserved_seeds, task_seeds
from homiebot.tasks.suite import get_task, load_suite
from homiebot.training.collect import check_seeds, collect_episodes
from homiebot.training.corrections import collect_corrections
from homiebot.training.dagger import run_dagger
from homiebot.training.episodes import TrainingDataError

EMMOE_TASK = "emmoe-001"  # scene seed 1037
PARTNR_TASK = "partnr-1-001"


def _muep_only_seed() -> int:
    """A MuEP task's seed that no other suite's evaluation plays."""
    return next(s for s in task_seeds("muep") if reserved_seeds()[s] == ("muep",))


def test_every_suites_evaluation_seeds_are_in_the_one_table() -> None:
    assert {"emmoe100", "partnr", "muep"} <= set(evaluation_suites())
    table = reserved_seeds()
    for suite in ("emmoe100", "partnr", "muep"):
        for seed in task_seeds(suite):
            assert all(suite in table[seed + r] for r in range(EVALUATION_RUNS)), (suite, seed)
    # MuEP's seeds read from its file are the suite's own (homiebot.eval.muep_suite loads the same file).
    assert task_seeds("muep") == tuple(t.seed for t in load_muep_suite())


def test_an_emmoe_or_partnr_collection_refuses_muep_evaluation_seeds(tmp_path) -> None:
    emmoe, partnr = get_task(EMMOE_TASK), get_task(PARTNR_TASK)
    muep_seed = _muep_only_seed()
    # The seed offset turns the task's seed into a MuEP task's: the same scene seed, so the same placement.
    with pytest.raises(TrainingDataError, match=rf"muep evaluation plays \({EMMOE_TASK} seed {muep_seed} \(muep\)"):
        check_seeds([emmoe], muep_seed - emmoe.seed, 1)
    with pytest.raises(TrainingDataError, match=rf"{PARTNR_TASK} seed {muep_seed} \(muep\)"):
        check_seeds([partnr], muep_seed - partnr.seed, 1, suite="partnr")
    out = tmp_path / "collected"
    with pytest.raises(TrainingDataError, match="muep evaluation plays"):
        collect_episodes(out, planner="expert", task_ids=[EMMOE_TASK], seed_offset=muep_seed - emmoe.seed)
    with pytest.raises(TrainingDataError, match="muep evaluation plays"):
        collect_episodes(out, planner="expert", suite="partnr", task_ids=[PARTNR_TASK],
                         seed_offset=muep_seed - partnr.seed)
    assert not out.exists()


def test_the_cli_refuses_a_muep_seed_in_one_line(tmp_path) -> None:
    emmoe = get_task(EMMOE_TASK)
    muep_seed = _muep_only_seed()
    out = tmp_path / "collected"
    result = CliRunner().invoke(build_app(), ["data", "collect", "--suite", "emmoe", "--planner", "expert", "--out",
                                              str(out), "--tasks", EMMOE_TASK, "--seed-offset",
                                              str(muep_seed - emmoe.seed)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if "error" in line]
    assert len(errors) == 1 and "muep evaluation plays" in errors[0], result.output
    assert not out.exists()


def test_corrections_and_dagger_refuse_muep_seeds(tmp_path) -> None:
    emmoe = get_task(EMMOE_TASK)
    muep_seed = _muep_only_seed()
    with pytest.raises(TrainingDataError, match="muep evaluation plays"):
        collect_corrections(tmp_path / "corrections", task_ids=[EMMOE_TASK], seed_offset=muep_seed - emmoe.seed)
    with pytest.raises(ValueError, match="muep evaluation plays"):
        run_dagger(tmp_path / "model", tmp_path / "dagger", tasks=[EMMOE_TASK], iterations=1,
                   seed_offset=muep_seed - emmoe.seed)
    assert not (tmp_path / "corrections").exists() and not (tmp_path / "dagger").exists()


def test_a_muep_collection_refuses_every_other_suites_seeds() -> None:
    for suite in ("emmoe100", "partnr"):
        seed = task_seeds(suite)[0]
        with pytest.raises(CollectionError, match=rf"run 0 seed {seed} \({suite}\)"):
            check_muep_seeds(seed, 1)


def test_every_collector_asks_the_one_table(monkeypatch) -> None:
    """A seed reserved in the table alone (no suite's file holds it) is refused by every collector."""
    free = 10_500
    check_seeds([get_task(EMMOE_TASK)], free - get_task(EMMOE_TASK).seed, 1)
    check_muep_seeds(free, 1)
    monkeypatch.setattr(reserved, "reserved_seeds", lambda runs=EVALUATION_RUNS: MappingProxyType({free: ("new",)}))
    with pytest.raises(TrainingDataError, match=rf"seed {free} \(new\)"):
        check_seeds([get_task(EMMOE_TASK)], free - get_task(EMMOE_TASK).seed, 1)
    with pytest.raises(TrainingDataError, match=rf"seed {free} \(new\)"):
        check_seeds([t for t in load_suite("partnr").tasks if t.id == PARTNR_TASK], free - get_task(PARTNR_TASK).seed,
                    1, suite="partnr")
    with pytest.raises(CollectionError, match=rf"seed {free} \(new\)"):
        check_muep_seeds(free, 1)

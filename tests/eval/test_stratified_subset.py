"""``homie eval --stratified N``: a subset spread over EMMOE-100's strata (split x horizon x kind of instruction)."""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.eval.manifest import EvalError, select_tasks, stratified_tasks, stratum_of


def test_thirty_of_emmoe_100_hold_every_stratum_in_proportion_and_the_same_each_time():
    tasks = select_tasks("emmoe100")
    strata = Counter(stratum_of(t) for t in tasks)
    chosen = stratified_tasks(tasks, 30)
    assert len(chosen) == 30 and len({t.id for t in chosen}) == 30
    picked = Counter(stratum_of(t) for t in chosen)
    assert set(picked) == set(strata)  # one at least from each of the 12
    # In proportion: the largest stratum (train, long, plain: 43 of 100) gives the most, about 30 x 43 / 100.
    assert picked[("train", "long", "plain")] == max(picked.values())
    assert 8 <= picked[("train", "long", "plain")] <= 14
    assert sum(n for (split, _h, _k), n in picked.items() if split == "test") >= 5  # every test stratum
    assert [t.id for t in chosen] == [t.id for t in stratified_tasks(tasks, 30)]
    assert [t.id for t in chosen] == sorted(t.id for t in chosen)  # in the suite's order


def test_too_few_for_the_strata_is_refused_and_all_gives_all():
    tasks = select_tasks("emmoe100")
    with pytest.raises(EvalError, match="12 strata"):
        stratified_tasks(tasks, 5)
    assert stratified_tasks(tasks, 100) == tasks


def test_the_cli_refuses_limit_with_stratified(tmp_path):
    result = CliRunner().invoke(build_app(), ["eval", "--out", str(tmp_path / "e"), "--limit", "3", "--stratified", "20"])
    assert result.exit_code != 0
    assert "--limit and --stratified" in result.output
    assert not (tmp_path / "e").exists()

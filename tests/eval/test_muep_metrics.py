"""MuEP's metrics reproduce rows of the paper's tables from synthetic episodes (MuEP paper, tables 3 and 4)."""

from __future__ import annotations

import pytest

from homiebot.eval.muep import (
    Convention,
    MuepEpisode,
    RepetitionStop,
    format_table,
    has_repetition,
    muep_row,
    muep_table,
    repeats,
)
from homiebot.tasks.alfred import GOAL_CONDITIONS

HEAT = "pick_heat_then_place_in_recep"


def episode(task_type: str, success: bool, steps: int, met: int | None = None, *, compliant: bool = True,
            repetition: bool = False, split: str = "unseen") -> MuepEpisode:
    """An episode of ``steps`` distinct actions (a repetition stops it early, as MuEP's client does)."""
    actions = tuple(f"go to place {i}" for i in range(steps))
    valid = tuple([True] * steps) if compliant else tuple([False] + [True] * (steps - 1))
    total = GOAL_CONDITIONS[task_type]
    return MuepEpisode(task_type, success, total if met is None else met, total, actions, valid, split, stopped_on_repeat=repetition)


def opt_unseen_heat() -> list[MuepEpisode]:
    """OPT-6.7B, unseen, Heat & place (table 4): 26 tasks, 23 solved in 266 steps in all, no partial credit
    on the 3 failures, 2 episodes with a non-compliant action, 2 stopped on a repetition."""
    steps = [12] * 13 + [11] * 10  # 156 + 110 = 266 = 11.565 * 23
    wins = [episode(HEAT, True, s, compliant=i != 0) for i, s in enumerate(steps)]
    fails = [
        episode(HEAT, False, 30, met=0, compliant=False),
        episode(HEAT, False, 6, met=0, repetition=True),
        episode(HEAT, False, 9, met=0, repetition=True),
    ]
    return wins + fails


def test_opt_unseen_heat_and_place_row() -> None:
    row = muep_row(opt_unseen_heat())
    assert row.n == 26
    assert [round(v, 2) for v in (row.sr, row.gcs, row.lc, row.rdi, row.is_steps)] == [88.46, 88.46, 92.31, 7.69, 11.57]


def test_the_prose_definitions_differ_where_the_paper_says() -> None:
    episodes = opt_unseen_heat()
    prose = muep_row(episodes, Convention.PROSE)
    assert round(prose.rdi, 2) == round(100 * 2 / 3, 2)  # repetitions over failed tasks
    valid = sum(sum(e.valid) for e in episodes)
    assert round(prose.lc, 2) == round(100 * valid / sum(e.steps for e in episodes), 2)  # valid actions / actions
    assert prose.sr == muep_row(episodes).sr and prose.is_steps == muep_row(episodes).is_steps


def test_opt_seen_overall_sr_and_gcs_are_the_episode_means() -> None:
    """OPT-6.7B, seen (tables 2 and 3): per type N, successes and goal conditions met, then the overall row
    SR 66.43 and GCS 70.36 (the mean of per-episode fractions; pooling would give 68.37)."""
    per_type = {  # type: (N, successes, conditions met by the failures in all)
        "pick_and_place_simple": (35, 27, 0),
        "look_at_obj_in_light": (13, 11, 1),  # 23/26
        "pick_clean_then_place_in_recep": (27, 20, 0),  # 60/81
        "pick_heat_then_place_in_recep": (16, 6, 0),  # 18/48
        "pick_cool_then_place_in_recep": (25, 18, 0),  # 54/75
        "pick_two_obj_and_place": (24, 11, 10),  # 32/48
    }
    episodes = []
    for task_type, (n, wins, partial) in per_type.items():
        for i in range(n):
            if i < wins:
                episodes.append(episode(task_type, True, 10, split="seen"))
            else:
                met = 1 if i - wins < partial else 0
                episodes.append(episode(task_type, False, 10, met=met, split="seen"))
    table = muep_table(episodes)
    overall = table["seen"]["overall"]
    assert (round(overall.sr, 2), round(overall.gcs, 2)) == (66.43, 70.36)
    assert round(table["seen"]["pick_two_obj_and_place"].gcs, 2) == 66.67
    assert round(table["seen"]["look_at_obj_in_light"].gcs, 2) == 88.46
    pooled = muep_row(episodes, Convention.PROSE).gcs
    assert round(pooled, 2) == 68.37
    assert list(table["seen"])[-1] == "overall"
    assert "| seen | Heat & place | 16 | 37.50 | 10.00 | 37.50 | 100.00 | 0.00 |" in format_table(table)


def test_is_is_undefined_without_a_success() -> None:
    row = muep_row([episode(HEAT, False, 5, met=1)])
    assert row.is_steps is None and row.cells()[1] == "-" and row.sr == 0.0


def test_repetitions_aa_and_abab() -> None:
    assert repeats(["go to fridge 1"], "Go to  Fridge 1")  # AA, normalised
    assert repeats(["open fridge 1", "go to sinkbasin 1", "open fridge 1"], "go to sinkbasin 1")  # ABAB
    assert not repeats(["open fridge 1", "go to sinkbasin 1"], "open fridge 1")  # ABA is allowed
    assert has_repetition(["a", "b", "a", "b"]) and has_repetition(["a", "a"])
    assert not has_repetition(["a", "b", "a", "c", "a"])


def test_repetition_stop_policy_and_step_cap() -> None:
    policy = RepetitionStop(max_steps=5)
    assert all(policy.allows(a) for a in ["a", "b", "a"])
    assert not policy.allows("b") and policy.stopped == "repeat"
    assert not policy.allows("c")  # stays stopped
    policy.reset()
    assert [policy.allows(a) for a in "abcdef"] == [True] * 5 + [False] and policy.stopped == "max_steps"
    lenient = RepetitionStop(stop_on_repeat=False)
    assert lenient.allows("a") and lenient.allows("a")


def test_bad_episodes_are_refused() -> None:
    with pytest.raises(ValueError, match="one flag per action"):
        MuepEpisode(HEAT, True, 3, 3, ("a",), (True, False))
    with pytest.raises(ValueError, match="goal_conditions_met"):
        MuepEpisode(HEAT, True, 4, 3)


@pytest.mark.slow
def test_muep_metrics_of_an_emmoe_evaluation(tmp_path) -> None:
    """`homie metrics --convention` on a `homie eval` directory: MuEP's table of EMMOE episodes, by attribute."""
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.eval.muep import emmoe_episodes

    runner = CliRunner()
    out = tmp_path / "eval"
    ran = runner.invoke(build_app(), ["eval", "--suite", "emmoe", "--planner", "random", "--tasks", "emmoe-001,emmoe-084",
                                      "--runs", "1", "--workers", "1", "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    episodes = emmoe_episodes(out)
    assert len(episodes) == 2 and all(e.steps >= 1 and len(e.valid) == e.steps for e in episodes)
    assert all(e.task_type in ("short-horizon", "long-horizon", "open-ended", "logical", "human-style") for e in episodes)
    result = runner.invoke(build_app(), ["metrics", str(out), "--convention", "tables"])
    assert result.exit_code == 0, result.output
    overall = [line.split("|") for line in result.output.splitlines() if "| Overall |" in line]
    assert sum(int(cells[3]) for cells in overall) == 2

"""``homie data skills`` passes over the scene seeds an evaluation plays (homiebot/data/skill_datasets.py, "Scene seeds
an evaluation plays are skipped"; docs/skill-data.md).

The recording loop runs here with a stand-in for the simulator's episodes and for LeRobot's writer (no physics, no
LeRobot): which seeds it runs, which it passes over, what the metadata and the summary say. One test builds the real
scene to show why: on a reserved seed whose draw is an evaluated task's apartment, the recorder's objects stand where
the evaluation's do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homiebot.data import skill_datasets
from homiebot.data.skill_datasets import EPISODES_FILE, EVAL_SEED_BASE, EpisodeRecord, Summary, split_of
from homiebot.tasks.reserved import reserved_seeds


class _Writer:
    """LeRobotDataset's writer calls, doing nothing but make the root."""

    frames = 0

    @classmethod
    def create(cls, root: Path, **_: Any) -> _Writer:
        (Path(root) / "meta").mkdir(parents=True)
        return cls()

    def add_frame(self, frame: dict[str, Any]) -> None:
        self.frames += 1

    def save_episode(self, parallel_encoding: bool = False) -> None:
        pass

    def finalize(self) -> None:
        pass


class _Episodes:
    """SkillEpisodes without a simulator: every seed runs one successful frame, except those in ``fails``."""

    ran: list[int] = []
    fails: set[int] = set()

    def __init__(self, skill: str, size: int, names: Any = None) -> None:
        self.skill = skill

    def run(self, seed: int) -> tuple[EpisodeRecord, list[dict[str, np.ndarray]]]:
        type(self).ran.append(seed)
        record = EpisodeRecord(seed, split_of(seed), self.skill, "emmoe-001", "apartment_1", "apple",
                               "pick up the apple", True, status="success", success=True, frames=1)
        if seed in self.fails:
            record.skipped = "no start pose reached"
            return record, []
        return record, [{"observation.state": np.zeros(10, np.float32)}]

    def close(self) -> None:
        pass


def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, episodes: int, first: int, split: str = "train",
            fails: tuple[int, ...] = ()) -> tuple[Summary, list[int], list[dict[str, Any]]]:
    monkeypatch.setattr(_Episodes, "ran", [])
    monkeypatch.setattr(_Episodes, "fails", set(fails))
    monkeypatch.setattr(skill_datasets, "SkillEpisodes", _Episodes)
    summary = Summary("pick", split, str(tmp_path))
    root = tmp_path / "dataset"
    skill_datasets._record(_Writer, summary, root, "pick", episodes, split, first, 16, False, None)
    rows = [json.loads(line) for line in (root / EPISODES_FILE).read_text().splitlines()]
    return summary, list(_Episodes.ran), rows


def test_the_default_training_seeds_start_past_the_evaluations_first_seeds(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Seeds 0-49: the demonstration tasks' runs 0-9 and the MuEP-style tasks' (seeds 1-40, runs 0-9): never run.
    summary, ran, rows = _record(tmp_path, monkeypatch, 3, 0)
    assert ran == [50, 51, 52]
    assert [r["seed"] for r in rows] == [50, 51, 52] and [r["episode_index"] for r in rows] == [0, 1, 2]
    assert summary.reserved == list(range(50)) and not summary.skipped
    assert "50 reserved scene seeds skipped (an evaluation plays them: demo, muep; seeds 0-49)" in summary.lines()
    assert summary.lines()[0].startswith("3 pick episodes (train seeds 50..52)")


def test_a_first_seed_among_reserved_ones_skips_them_without_spending_the_seed_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 101-149 are 49 reserved seeds in a row, more than one episode's budget of tried seeds (SEED_BUDGET + 10).
    assert all(s in reserved_seeds() for s in range(101, 150)) and 150 not in reserved_seeds()
    summary, ran, rows = _record(tmp_path, monkeypatch, 1, 101)
    assert ran == [150] and [r["seed"] for r in rows] == [150]
    assert summary.reserved == list(range(101, 150))
    assert "seeds 101-149)" in summary.lines()[-1]


def test_a_seed_that_cannot_start_is_still_skipped_and_counted_apart(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    summary, ran, rows = _record(tmp_path, monkeypatch, 2, 45, fails=(50,))
    assert ran == [50, 51, 52] and [r["seed"] for r in rows] == [51, 52]
    assert [r.seed for r in summary.skipped] == [50] and summary.reserved == [45, 46, 47, 48, 49]


def test_the_eval_split_meets_no_reserved_seed_and_would_skip_one(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert max(reserved_seeds()) < EVAL_SEED_BASE  # held-out placements' seeds are unchanged by the skip
    summary, ran, _ = _record(tmp_path / "a", monkeypatch, 2, EVAL_SEED_BASE, "eval")
    assert ran == [EVAL_SEED_BASE, EVAL_SEED_BASE + 1] and summary.reserved == []
    assert summary.lines()[-1] == "0 reserved scene seeds skipped (an evaluation plays them)"
    # A suite whose seeds reached the split would be skipped there too: the rule is the same in both splits.
    monkeypatch.setattr(skill_datasets, "reserved_seeds", lambda: {EVAL_SEED_BASE: ("future",)})
    summary, ran, _ = _record(tmp_path / "b", monkeypatch, 1, EVAL_SEED_BASE, "eval")
    assert ran == [EVAL_SEED_BASE + 1] and summary.reserved == [EVAL_SEED_BASE]


def test_the_documented_reserved_training_seeds() -> None:
    """The module docstring's and docs/skill-data.md's figure: 176 of seeds 0-999, the demonstrations' and MuEP's."""
    from homiebot.data.skill_datasets import free_seeds, seed_ranges

    passed: list[int] = []
    free = [s for _, s in zip(range(824), free_seeds(0, "train", passed), strict=False)]
    assert free[-1] == 999 and len(passed) == 176 and sorted(free + passed) == list(range(1000))
    assert seed_ranges(passed) == "0-49, 101-149, 201-249, 301-328"
    assert {name for s in passed for name in reserved_seeds()[s]} == {"demo", "muep"}


def test_a_reserved_seed_can_be_the_evaluations_very_scene() -> None:
    """Why the seeds are skipped: seed 32 draws an apartment_5 task, and a MuEP-style task is evaluated in
    apartment_5 on scene seed 32: the recorder's objects stand exactly where that evaluation's do."""
    from homiebot.sim.mujoco.backend import MujocoSimulator

    assert "muep" in reserved_seeds()[32]
    episodes = skill_datasets.SkillEpisodes("pick", size=16)
    evaluation = MujocoSimulator(render=False)
    try:
        plan, _ = episodes.plan(32)
        assert plan.scene == "apartment_5"
        evaluation.reset("apartment_5", seed=32)

        def objects(sim: Any) -> dict[str, tuple[float, float, float]]:
            return {n: e.position for n, e in sim.state().entities.items() if e.kind.value == "object"}

        recorded, evaluated = objects(episodes.sim), objects(evaluation)
        assert len(recorded) > 10 and recorded == evaluated
    finally:
        episodes.close()
        evaluation.shutdown()

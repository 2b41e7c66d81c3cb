"""MuEP training data: the text expert's episodes on tasks the suite does not hold and seeds no evaluation plays
(homiebot.eval.muep_collect), built into episode rows of the EMMOE sets' form (homiebot.training.muep_data)."""

from __future__ import annotations

import json

import pytest

from homiebot.eval.muep_collect import CollectionError, check_seeds, collect_muep, training_tasks
from homiebot.eval.muep_suite import SEEN_SCENES, load_suite
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.reserved import evaluation_seeds
from homiebot.textworld.chat import episode_messages
from homiebot.training.build import BuildOptions, build
from homiebot.training.episodes import TrainingDataError
from homiebot.training.muep_data import command_verb, is_muep_collection

SEED = 10_000


@pytest.fixture(scope="module")
def generated():
    sim = MujocoSimulator(render=False)
    try:
        yield training_tasks(sim, SEED)
    finally:
        sim.shutdown()


def test_the_evaluation_seeds_are_refused() -> None:
    assert {t.seed for t in load_suite()} <= evaluation_seeds("muep", 1)
    with pytest.raises(CollectionError, match="muep evaluation plays .* --seed-offset \\d+ or more fits"):
        check_seeds(1, 1)
    with pytest.raises(CollectionError, match="emmoe100 evaluation"):
        check_seeds(1037, 1)  # an EMMOE-100 task's seed: refused too (any apartment)
    check_seeds(SEED, 10)


def test_without_a_seed_offset_the_cli_collects_on_the_documented_one(tmp_path, generated) -> None:
    """``homie data collect --suite muep --out D`` used to be refused (its default offset 0 is a reserved seed)."""
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.eval.muep_collect import DEFAULT_SEED_OFFSET

    assert DEFAULT_SEED_OFFSET == SEED
    check_seeds(DEFAULT_SEED_OFFSET, 10)
    task = next(t.id for t in generated if t.split == "validation")
    out = tmp_path / "muep"
    result = CliRunner().invoke(build_app(), ["data", "collect", "--suite", "muep", "--split", "validation",
                                              "--tasks", task, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"scene seeds: {SEED} (--seed-offset) + the run" in result.output, result.output
    assert json.loads((out / "collect.json").read_text())["seed_offset"] == SEED


def test_training_tasks_are_not_the_suites_and_only_in_seen_apartments(generated) -> None:
    suite = {(t.task_type, t.scene, t.object_type, t.receptacle_type, t.toggle_type) for t in load_suite()}
    keys = [(t.task_type, t.scene, t.object_type, t.receptacle_type, t.toggle_type) for t in generated]
    assert len(set(keys)) == len(keys) and not set(keys) & suite
    assert {t.scene for t in generated} <= set(SEEN_SCENES)
    assert {t.split for t in generated} == {"train", "validation"}
    validation = sum(t.split == "validation" for t in generated)
    assert 0.08 < validation / len(generated) < 0.12


def test_collect_then_build_an_episode_set(tmp_path, generated) -> None:
    ids = [next(t.id for t in generated if t.split == "train" and t.task_type == kind)
           for kind in ("pick_and_place_simple", "look_at_obj_in_light")]
    out = tmp_path / "collect"
    summary = collect_muep(out, runs=2, seed_offset=SEED, task_ids=ids)
    assert summary.episodes + summary.goal_at_start == 4 and summary.not_admissible == 0
    assert summary.succeeded == summary.episodes >= 2
    assert is_muep_collection(out) and not is_muep_collection(tmp_path)
    again = collect_muep(out, runs=2, seed_offset=SEED, task_ids=ids)  # resumed: nothing played twice
    assert again.episodes == 0 and again.skipped == summary.episodes
    with pytest.raises(CollectionError, match="other settings"):
        collect_muep(out, runs=3, seed_offset=SEED, task_ids=ids)
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert {r["seed"] for r in records} <= {SEED, SEED + 1}
    with pytest.raises(TrainingDataError, match="--rewrites 0"):
        build([out], tmp_path / "x", "sft", BuildOptions(episodes=True))
    with pytest.raises(TrainingDataError, match="--episodes"):
        build([out], tmp_path / "x", "sft", BuildOptions(rewrites=0))
    stats = build([out], tmp_path / "set", "sft", BuildOptions(episodes=True, rewrites=0))
    assert stats.episodes == summary.episodes and stats.per_kind["answers in context only"] == 0
    assert set(stats.mix["actions"]) <= {"go to", "take", "move", "use", "open"}
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "set" / "data" / "train.parquet").to_pylist()
    assert set(rows[0]) == {"id", "variant", "messages", "answer_loss"}  # the EMMOE episode sets' columns
    first = records[0]
    row = next(r for r in rows if r["id"] == f"{first['task']}_run{first['run']}_seed{first['seed']}")
    assert row["messages"] == episode_messages(first["intro"], [tuple(s) for s in first["transcript"]])
    assert row["answer_loss"] == [True] * len(first["transcript"])
    with pytest.raises(TrainingDataError, match="different sets"):
        build([out, tmp_path], tmp_path / "y", "sft", BuildOptions(episodes=True, rewrites=0))


def test_command_verbs() -> None:
    from homiebot.training.data_check import Sample, sample_mix

    assert [command_verb(c) for c in ("go to sofa 1", "take a 1 from b 1", "")] == ["go to", "take", "empty"]
    answers = ["go to sofa 1", "Subtask: [Pick, apple]\nModel: M3", "dance"]
    mix = sample_mix(Sample(str(i), (), a) for i, a in enumerate(answers))  # homie data check's action mix
    assert mix["actions"] == {"go to": 1, "Pick": 1, "unparsed": 1}


def test_a_damaged_episodes_file_is_one_line_naming_its_place(tmp_path) -> None:
    """The collection and the build read ``episodes.jsonl`` through one reader: a line that is not JSON is refused
    with its file and line number, in each one's own error."""
    from homiebot.eval.muep_collect import read_records
    from homiebot.training.episodes import TrainingDataError
    from homiebot.training.muep_data import read_episodes

    assert read_records(tmp_path) == []
    with pytest.raises(TrainingDataError, match="no episodes.jsonl"):
        read_episodes(tmp_path)
    (tmp_path / "episodes.jsonl").write_text('{"task": "a"}\n\n{"task": \n', encoding="utf-8")
    with pytest.raises(CollectionError, match=r"episodes.jsonl:3: not an episode record"):
        read_records(tmp_path)
    with pytest.raises(TrainingDataError, match=r"episodes.jsonl:3: not an episode record"):
        read_episodes(tmp_path)
    (tmp_path / "episodes.jsonl").write_text('{"task": "a"}\n\n{"task": "b"}\n', encoding="utf-8")
    assert [r["task"] for r in read_records(tmp_path)] == [r["task"] for r in read_episodes(tmp_path)] == ["a", "b"]

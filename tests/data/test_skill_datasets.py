"""``homie data skills``: the physical skills' executions recorded as LeRobot data sets (docs/skill-data.md).

The recording test runs the real physical Pick on the embedded simulator and writes with LeRobot's own writer, then
reads the data set back with ``LeRobotDataset``; it needs ``lerobot`` (0.6.x, Python >= 3.12) and is skipped with the
reason where it is not importable. The refusals (an unknown skill, an output that exists or cannot be written, an
evaluation seed asked for training data, LeRobot missing) need no LeRobot: one line, a non-zero exit, nothing written.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.cli.failures import EXIT_BAD_INPUT, EXIT_ENVIRONMENT
from homiebot.data import skill_datasets
from homiebot.data.skill_datasets import (
    ENV_STATE,
    EPISODES_FILE,
    EVAL_SEED_BASE,
    JOINTS,
    TARGET_STATE,
    SkillDataError,
    emmoe_code,
    record_skill_dataset,
    split_of,
    target_state,
)
from homiebot.skills.physical import PhysicalSkillSet
from homiebot.types import Action, ErrorCode, SkillResult, SkillStatus


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ---------------------------------------------------------------------------------------------- held-out seeds


def test_evaluation_seeds_are_never_training_seeds() -> None:
    assert split_of(0) == "train" and split_of(EVAL_SEED_BASE - 1) == "train"
    assert split_of(EVAL_SEED_BASE) == "eval" and split_of(EVAL_SEED_BASE + 123) == "eval"
    with pytest.raises(SkillDataError, match="is an evaluation seed, not one of --split train"):
        record_skill_dataset("pick", 1, "/nonexistent/never-written", split="train", first_seed=EVAL_SEED_BASE)
    with pytest.raises(SkillDataError, match="is a training seed, not one of --split eval"):
        record_skill_dataset("pick", 1, "/nonexistent/never-written", split="eval", first_seed=5)
    assert not Path("/nonexistent").exists()


def test_one_execution_maps_to_the_code_the_executor_gives_it() -> None:
    assert emmoe_code(Action.PICK, SkillResult(SkillStatus.SUCCESS)) is ErrorCode.OK
    assert emmoe_code(Action.PICK, SkillResult(SkillStatus.EXECUTION_FAILED, "grasp missed")) is ErrorCode.E1
    assert emmoe_code(Action.PICK, SkillResult(SkillStatus.NO_PATH)) is ErrorCode.E1
    assert emmoe_code(Action.PICK, SkillResult(SkillStatus.TOO_FAR)) is ErrorCode.D1
    assert emmoe_code(Action.OPEN, SkillResult(SkillStatus.NOT_INTERACTIVE)) is ErrorCode.L4
    assert emmoe_code(Action.PUT, SkillResult(SkillStatus.DROPPED)) is ErrorCode.E2


# ---------------------------------------------------------------------------------------------- refusals


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(build_app(), ["data", "skills", *args])


def _one_error_line(done, code: int, *words: str) -> None:  # type: ignore[no-untyped-def]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.exit_code == code, done.output
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert done.exception is None or isinstance(done.exception, SystemExit)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--skill", "juggle", "-n", "1"], ("unknown --skill 'juggle'", "pick")),
        (["--skill", "pick", "-n", "0"], ("--count must be positive",)),
        (["--skill", "pick", "-n", "1", "--split", "test"], ("unknown split 'test'",)),
        (["--skill", "pick", "-n", "1", "--first-seed", str(EVAL_SEED_BASE)], ("--first-seed: seed 1000000 is an evaluation seed",)),
        (["--skill", "pick", "-n", "1", "--split", "eval", "--first-seed", "3"], ("--first-seed: seed 3 is a training seed",)),
        (["--skill", "pick", "-n", "1", "--cameras", "front"], ("--cameras front", "head, wrist")),
        (["--skill", "pick", "-n", "1", "--cameras", "wrist,wrist"], ("--cameras wrist,wrist", "each once")),
        (["--skill", "go_to", "-n", "1", "--mark-target"], ("the arm skills'", "go_to records")),
    ],
)
def test_bad_options_are_refused_before_anything_is_written(tmp_path: Path, args: list[str], words: tuple[str, ...]) -> None:
    done = _invoke(*args, "--out", str(tmp_path / "ds"))
    _one_error_line(done, EXIT_BAD_INPUT, *words)
    assert _snapshot(tmp_path) == set()


def test_an_output_that_exists_or_cannot_be_written_is_refused(tmp_path: Path) -> None:
    existing = tmp_path / "ds"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    before = _snapshot(tmp_path)
    _one_error_line(_invoke("--skill", "pick", "-n", "1", "--out", str(existing)), EXIT_BAD_INPUT,
                    "exists and is not an empty folder")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    before = _snapshot(tmp_path)
    _one_error_line(_invoke("--skill", "pick", "-n", "1", "--out", str(blocker / "ds")), EXIT_BAD_INPUT, "cannot write --out")
    _one_error_line(_invoke("--skill", "pick", "-n", "1", "--out", "/proc/homie-test/ds"), EXIT_BAD_INPUT, "cannot write --out")
    assert _snapshot(tmp_path) == before
    assert (existing / "keep.txt").read_text() == "mine"


def test_without_lerobot_one_line_exit_1_and_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail as it does where lerobot is not installed.
    monkeypatch.setitem(sys.modules, "lerobot", None)
    monkeypatch.setitem(sys.modules, "lerobot.datasets.lerobot_dataset", None)
    done = _invoke("--skill", "pick", "-n", "2", "--out", str(tmp_path / "new" / "ds"))
    _one_error_line(done, EXIT_ENVIRONMENT, "needs LeRobot", "docs/skill-data.md")
    assert _snapshot(tmp_path) == set()


# ---------------------------------------------------------------------------------------------- recording

LEROBOT_REASON = "lerobot is not importable (lerobot[dataset]==0.6.1 needs Python >= 3.12: docs/skill-data.md)"


def _lerobot_dataset():  # type: ignore[no-untyped-def]
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError:
        pytest.skip(LEROBOT_REASON)
    return LeRobotDataset


@pytest.mark.slow
def test_pick_episodes_are_recorded_with_lerobot_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    LeRobotDataset = _lerobot_dataset()
    # The second episode plans from a world graph that has its object 12 cm to the side (a stale graph, as perception
    # can give): the real skill closes the fingers on air, and the episode must be recorded as a failure.
    world = PhysicalSkillSet.world
    stale = {"on": False}

    def shifted(self):  # type: ignore[no-untyped-def]
        state = world(self)
        if not stale["on"] or state.held is not None:
            return state
        target = stale["target"]
        entity = state.entities[target]
        side = np.array([-math.sin(state.robot.yaw), math.cos(state.robot.yaw), 0.0]) * 0.12
        moved = dataclasses.replace(entity, position=tuple(np.add(entity.position, side)),
                                    bbox_min=tuple(np.add(entity.bbox_min, side)),
                                    bbox_max=tuple(np.add(entity.bbox_max, side)))
        return dataclasses.replace(state, entities={**state.entities, target: moved})

    monkeypatch.setattr(PhysicalSkillSet, "world", shifted)
    plan = skill_datasets.SkillEpisodes.plan

    def planned(self, seed):  # type: ignore[no-untyped-def]
        episode, spec = plan(self, seed)
        stale["on"], stale["target"] = seed == 51, episode.target
        return episode, spec

    monkeypatch.setattr(skill_datasets.SkillEpisodes, "plan", planned)
    out = tmp_path / "pick"
    seen = []
    summary = record_skill_dataset("pick", 2, out, size=32, progress=seen.append)
    records = [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines()]
    # Seeds 0-49 are evaluations' scene seeds (tests/data/test_skill_data_seeds.py): the first training seed is 50.
    assert [r["seed"] for r in records] == [50, 51] and [r["split"] for r in records] == ["train", "train"]
    assert records[0]["success"] and records[0]["emmoe_code"] == "OK"
    assert not records[1]["success"] and records[1]["emmoe_code"] == "E1" and "grasp missed" in records[1]["detail"]
    assert all(r["task"] == f"pick up the {r['target']}" for r in records)
    assert summary.episodes and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left

    dataset = LeRobotDataset("homiebot/pick", root=out, video_backend="pyav")
    assert dataset.num_episodes == 2
    assert len(dataset) == sum(r["frames"] for r in records) and all(r["frames"] > 20 for r in records)
    assert dataset.fps == 10
    assert dataset.meta.features["observation.state"]["names"] == list(JOINTS)
    frames = [dataset[i] for i in range(len(dataset))]
    first = frames[0]
    assert tuple(first["observation.images.head"].shape) == (3, 32, 32)
    assert tuple(first["observation.images.wrist"].shape) == (3, 32, 32)
    assert tuple(first["observation.state"].shape) == (10,) and tuple(first["action"].shape) == (10,)
    assert first["task"] == records[0]["task"]
    # Which object: the target's box in the base's frame, ahead of the robot, an object's size, the same every frame
    # while the base stands (the policy's only clue to the target: ACT takes no task text).
    assert dataset.meta.features[ENV_STATE]["names"] == list(TARGET_STATE)
    target = np.stack([f[ENV_STATE].numpy() for f in frames[: records[0]["frames"]]])
    assert target.shape[1] == 6 and 0.2 < target[0, 0] < 1.5 and abs(target[0, 1]) < 1.0 and 0.0 < target[0, 2] < 2.0
    assert np.all((target[0, 3:] > 0.0) & (target[0, 3:] < 0.5))
    if not records[0]["base_jumps"]:
        assert np.allclose(target, target[0], atol=0.01)  # the base sways a little under the arm
    ends = [i for i, f in enumerate(frames) if bool(f["next.done"])]
    assert ends == [records[0]["frames"] - 1, len(frames) - 1]
    successes = [i for i, f in enumerate(frames) if bool(f["next.success"])]
    assert successes == [ends[0]]  # the failed episode has no success frame
    # The fingers' targets close during a Pick: the actions are the controllers' commands, not the joints' state.
    fingers = np.array([f["action"][8].item() for f in frames[: ends[0] + 1]])
    assert fingers.max() > 0.03 and fingers.min() < 0.01
    images = np.stack([f["observation.images.wrist"].numpy() for f in frames[:: max(1, len(frames) // 8)]])
    assert images.std() > 0.02  # not blank


def test_the_target_box_is_given_in_the_base_frame() -> None:
    # A base at (1, 2) facing +y (yaw 90 degrees); a box 1 m ahead of it, 0.4 m long in x and 0.1 m in y (world).
    got = target_state((0.8, 2.95, 0.4), (1.2, 3.05, 0.6), 1.0, 2.0, math.pi / 2)
    assert np.allclose(got, [1.0, 0.0, 0.5, 0.1, 0.4, 0.2], atol=1e-6)  # ahead, centred; the extents swap
    left = target_state((0.8, 2.95, 0.4), (1.2, 3.05, 0.6), 1.0, 2.0, 0.0)
    assert np.allclose(left[:2], [0.0, 1.0], atol=1e-6)  # facing +x, the same box is to the left


# ---------------------------------------------------------------------------------------------- Go to's replay


def test_go_to_motion_is_replayed_as_the_follower_drives_it() -> None:
    from homiebot.data.skill_datasets import _motion_path, _pose_at
    from homiebot.sim.mujoco.backend import DRIVE_SPEED, TURN_SPEED
    from homiebot.sim.mujoco.skill_observation import goal_in_base as _relative
    from homiebot.types import Pose2D

    # From (0, 0) facing +x: corners (1, 0) then (1, 1), the goal faces -x there.
    start, end = Pose2D(0.0, 0.0, 0.0), Pose2D(1.0, 1.0, math.pi)
    pieces = _motion_path([(start, [(1.0, 0.0), (1.0, 1.0)], end, True)])
    assert [(round(length, 6), round(turn, 6)) for _, length, turn in pieces] == [
        (1.0, 0.0), (1.0, round(math.pi / 2, 6)), (0.0, round(math.pi / 2, 6))]
    durations = [abs(turn) / TURN_SPEED + length / DRIVE_SPEED for _, length, turn in pieces]
    halfway = _pose_at(pieces, durations, 0.5 / DRIVE_SPEED)
    assert math.isclose(halfway.x, 0.5) and math.isclose(halfway.y, 0.0, abs_tol=1e-9)
    turning = _pose_at(pieces, durations, durations[0] + 0.25 * math.pi / TURN_SPEED)  # a quarter of pi into the turn
    assert math.isclose(turning.x, 1.0) and math.isclose(turning.yaw, math.pi / 4)
    final = _pose_at(pieces, durations, sum(durations))
    assert math.isclose(final.x, 1.0) and math.isclose(final.y, 1.0) and math.isclose(abs(final.yaw), math.pi)
    # A goal stopped short of its corner ends where the base stopped, with no turn to the goal's heading.
    short = _motion_path([(start, [], Pose2D(0.4, 0.0, 0.0), False)])
    assert [(round(length, 6), turn) for _, length, turn in short] == [(0.4, 0.0)]
    # The goal in the base's frame: ahead is x, left is y.
    assert np.allclose(_relative(Pose2D(1.0, 1.0, math.pi / 2), Pose2D(1.0, 3.0, math.pi)), (2.0, 0.0, math.pi / 2))


@pytest.mark.slow
def test_a_go_to_episode_is_recorded_with_base_velocities_and_a_goal_image(tmp_path: Path) -> None:
    LeRobotDataset = _lerobot_dataset()
    out = tmp_path / "go_to"
    record_skill_dataset("go_to", 1, out, size=32)
    record = json.loads((out / EPISODES_FILE).read_text().splitlines()[0])
    assert record["task"] == f"go to the {record['target']}" and record["base_moved"]
    dataset = LeRobotDataset("homiebot/go_to", root=out, video_backend="pyav")
    assert dataset.num_episodes == 1 and len(dataset) == record["frames"] >= 5
    names = dataset.meta.features
    assert names["observation.state"]["names"] == ["goal_x", "goal_y", "goal_yaw"]
    assert names["action"]["names"] == ["linear_x", "angular_z"]
    assert "observation.images.wrist" not in names
    frames = [dataset[i] for i in range(len(dataset))]
    assert tuple(frames[0]["observation.images.goal"].shape) == (3, 32, 32)
    assert all(np.array_equal(f["observation.images.goal"].numpy(), frames[0]["observation.images.goal"].numpy()) for f in frames)
    actions = np.stack([f["action"].numpy() for f in frames])
    assert np.allclose(actions[-1], 0.0)  # at rest at the end
    assert actions[:, 0].max() <= 0.6 + 1e-3 and np.abs(actions[:, 1]).max() <= 1.0 + 1e-3  # the follower's speeds
    # Integrating the velocities leads to the goal: its pose in the base's frame at the end is where the base stands.
    last = frames[-1]["observation.state"].numpy()
    assert bool(frames[-1]["next.done"]) and bool(frames[-1]["next.success"]) == record["success"]
    if record["success"]:
        assert np.allclose(last, 0.0, atol=1e-3)


def test_a_seed_on_which_the_simulator_stops_is_skipped_and_the_next_one_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import mujoco

    from homiebot.data.skill_datasets import SkillEpisodes

    calls = {"n": 0}
    run = PhysicalSkillSet.run

    def failing_once(self, action, model, target, place=None):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise mujoco.FatalError("mj_nc: contact 10 involves sleeping geom 44")
        return run(self, action, model, target, place)

    monkeypatch.setattr(PhysicalSkillSet, "run", failing_once)
    episodes = SkillEpisodes("pick", size=16)
    try:
        first, frames = episodes.run(0)
        assert first.skipped.startswith("the simulator stopped: mj_nc") and frames == []
        second, frames = episodes.run(0)  # the same seed again, on the same simulator: a whole episode
        assert not second.skipped and second.success and len(frames) == second.frames >= 20
    finally:
        episodes.close()


def test_the_recipes_images_are_named_by_camera_and_mark() -> None:
    from homiebot.data.skill_datasets import features, image_names

    assert image_names("pick") == ("head", "wrist")
    assert image_names("pick", ["wrist", "head"]) == ("head", "wrist")  # the recorder's order
    assert image_names("pick", ["wrist"], mark_target=True) == ("wrist_marked",)
    assert image_names("go_to") == ("head", "goal")
    spec = features(64, False, "pick", image_names("pick", ["wrist"], True))
    assert [k for k in spec if k.startswith("observation.images.")] == ["observation.images.wrist_marked"]
    assert spec["observation.images.wrist_marked"]["shape"] == (64, 64, 3) and ENV_STATE in spec


def test_the_marked_image_is_the_plain_one_with_the_targets_pixels_tinted() -> None:
    """The wrist camera's marked image differs from its plain image exactly at the target's pixels (the segmentation
    render's), each moved half way to the mark's colour; another object's geoms mark other pixels; a marked image
    without the target's geoms is refused."""
    from homiebot.sim.mujoco.skill_cameras import MARK_ALPHA, MARK_RGB, SkillCameras, object_geoms

    episodes = skill_datasets.SkillEpisodes("pick", size=32)
    try:
        plan, _spec = episodes.plan(0)
        compiled, data = episodes.sim.physics_handles()
        model = compiled.model
        cameras = SkillCameras(model, 32)
        try:
            # The head camera sees the target from the start pose (the wrist camera looks at the counter's edge).
            skills = PhysicalSkillSet(episodes.sim, seed=0)
            episodes._start_pose(skills, plan, np.random.default_rng([0, 20261130, 1]))
            target = object_geoms(model, plan.target)
            assert target
            images = cameras.render(data, ("head", "head_marked"), target)
            assert list(images) == ["head", "head_marked"]
            changed = np.any(images["head"] != images["head_marked"], axis=2)
            assert 0 < int(changed.sum()) <= cameras.target_pixels["head_marked"] < 32 * 32 // 4
            plain = images["head"][changed].astype(float)
            want = plain * (1 - MARK_ALPHA) + np.array(MARK_RGB, dtype=float) * MARK_ALPHA
            assert np.abs(images["head_marked"][changed].astype(float) - want).max() <= 1.0
            assert not np.array_equal(cameras.render(data, ("head_marked",), frozenset())["head_marked"],
                                      images["head_marked"])  # nothing to mark: the plain image
            with pytest.raises(ValueError, match="needs the target's geoms"):
                cameras.render(data, ("wrist_marked",))
        finally:
            cameras.close()
    finally:
        episodes.close()


@pytest.mark.slow
def test_one_marked_wrist_camera_is_recorded_as_asked_and_read_back(tmp_path: Path) -> None:
    """``--cameras wrist --mark-target``: the data set holds the one image ``wrist_marked`` at the size asked, beside
    the joints and the target's box; each episode's metadata says in what share of its frames the target was seen."""
    LeRobotDataset = _lerobot_dataset()
    out = tmp_path / "pick"
    done = _invoke("--skill", "pick", "-n", "1", "--cameras", "wrist", "--size", "32", "--mark-target", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert "the target in view: wrist_marked in" in done.stdout
    record = json.loads((out / EPISODES_FILE).read_text().splitlines()[0])
    assert set(record["target_visible"]) == {"wrist_marked"} and 0.2 < record["target_visible"]["wrist_marked"] <= 1.0
    dataset = LeRobotDataset("homiebot/pick", root=out, video_backend="pyav")
    images = sorted(k for k in dataset.meta.features if k.startswith("observation.images."))
    assert images == ["observation.images.wrist_marked"]
    last = dataset[record["frames"] - 1]  # the object in the hand, in the wrist camera's view: tinted
    rgb = last["observation.images.wrist_marked"].numpy().transpose(1, 2, 0)
    assert rgb.shape == (32, 32, 3) and tuple(last[ENV_STATE].shape) == (6,)
    assert np.any((rgb[..., 0] > 0.5) & (rgb[..., 2] > 0.5) & (rgb[..., 1] < 0.5))  # magenta-ish pixels

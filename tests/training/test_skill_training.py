"""``homie train skill``: a LeRobot ACT policy trained on the CPU from ``homie data skills``' data sets
(docs/skill-data.md, "Training a skill policy").

The refusals (a missing or foreign data folder, evaluation episodes, another skill's data, data of two action spaces,
an output that cannot be written or is not empty, LeRobot missing) need no LeRobot: the data sets are stand-ins with
the two metadata files the checks read. The training test records two real Pick episodes on the embedded simulator,
trains a tiny ACT for a few steps, stops, resumes, checks the resumed run is the uninterrupted one, and loads the
policy folder back with LeRobot and with the stack's SkillPolicy; it is skipped with the reason where LeRobot is not importable.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.cli.failures import EXIT_BAD_INPUT, EXIT_ENVIRONMENT
from homiebot.data.skill_datasets import EPISODES_FILE, EVAL_SEED_BASE
from homiebot.skills.learned import SkillPolicyError, read_inputs
from homiebot.tasks.reserved import reserved_seeds
from homiebot.training.skills import (
    SkillTrainSettings,
    StepLog,
    _StepBatches,
    check_out,
    check_skill_data,
    train_skill_policy,
)


def _stand_in(root: Path, skill: str = "pick", seeds: tuple[int, ...] = (50, 51), success: bool = True) -> Path:
    """A folder with the two files the checks read (LeRobot's meta/info.json, the episodes' metadata); 50 and 51 are
    the first training seeds no evaluation plays (homiebot.tasks.reserved)."""
    (root / "meta").mkdir(parents=True)
    arm = skill != "go_to"
    features = {
        "observation.images.head": {"shape": [32, 32, 3]},
        f"observation.images.{'wrist' if arm else 'goal'}": {"shape": [32, 32, 3]},
        "observation.state": {"shape": [10 if arm else 3]},
        "action": {"shape": [10 if arm else 2]},
    }
    (root / "meta" / "info.json").write_text(json.dumps({"fps": 10, "total_episodes": len(seeds), "features": features}))
    (root / EPISODES_FILE).write_text("".join(
        json.dumps({"seed": s, "skill": skill, "success": success, "frames": 30}) + "\n" for s in seeds
    ))
    return root


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(build_app(), ["train", "skill", *args])


def _one_error_line(done, code: int, *words: str) -> None:  # type: ignore[no-untyped-def]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.exit_code == code, done.output
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert all(word in lines[0] for word in words), lines[0]


@pytest.mark.parametrize(
    ("make", "extra", "words"),
    [
        (lambda t: t / "missing", [], ("--data", "missing", "does not exist")),
        (lambda t: (t / "plain").mkdir() or t / "plain", [], ("no meta/info.json", "not a LeRobot data set")),
        (lambda t: _stand_in(t / "eval", seeds=(EVAL_SEED_BASE, EVAL_SEED_BASE + 3)), [],
         ("2 evaluation episodes", f"{EVAL_SEED_BASE}-{EVAL_SEED_BASE + 3}", "never trained on")),
        (lambda t: _stand_in(t / "mixed", seeds=(4, EVAL_SEED_BASE)), [], ("1 evaluation episodes",)),
        (lambda t: _stand_in(t / "pick"), ["--skill", "open"], ("holds pick episodes", "policy's skill (open)")),
        (lambda t: _stand_in(t / "pick"), ["--skill", "fly"], ("unknown --skill 'fly'",)),
        (lambda t: _stand_in(t / "failed", success=False), [], ("none of its 2 episodes succeeded", "--keep-failed")),
        (lambda t: _stand_in(t / "pick"), ["--policy", "diffusion"], ("unknown --policy 'diffusion'", "lerobot[diffusion]")),
        (lambda t: _stand_in(t / "pick"), ["--max-steps", "0"], ("--max-steps must be at least 1",)),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(tmp_path: Path, make, extra, words) -> None:  # type: ignore[no-untyped-def]
    data = make(tmp_path)
    done = _invoke("--data", str(data), "--out", str(tmp_path / "run"), *extra)
    _one_error_line(done, EXIT_BAD_INPUT, *words)
    assert not (tmp_path / "run").exists()


def test_data_of_the_arm_and_of_the_base_do_not_make_one_policy(tmp_path: Path) -> None:
    done = _invoke("--data", str(_stand_in(tmp_path / "pick")), "--data", str(_stand_in(tmp_path / "go", "go_to")),
                   "--out", str(tmp_path / "run"))
    _one_error_line(done, EXIT_BAD_INPUT, "mix skills of different inputs and outputs", "pick, go_to")
    assert not (tmp_path / "run").exists()


def test_a_validation_set_must_be_held_out_and_of_the_same_inputs(tmp_path: Path) -> None:
    data = str(_stand_in(tmp_path / "pick", seeds=(50, 51)))
    shared = str(_stand_in(tmp_path / "shared", seeds=(51, EVAL_SEED_BASE)))
    done = _invoke("--data", data, "--val", shared, "--out", str(tmp_path / "run"))
    _one_error_line(done, EXIT_BAD_INPUT, "--val shares 1 placements (seeds 51...)", "--split eval")
    done = _invoke("--data", data, "--val", str(_stand_in(tmp_path / "go", "go_to", seeds=(EVAL_SEED_BASE,))),
                   "--out", str(tmp_path / "run"))
    _one_error_line(done, EXIT_BAD_INPUT, "--val", "holds go_to episodes, not of the policy's skill (pick)")
    assert not (tmp_path / "run").exists()


def test_episodes_on_an_evaluation_scene_seed_are_left_out_and_counted(tmp_path: Path) -> None:
    # 0 (the demonstrations') and 32 (a MuEP-style task's, whose scene the recorder reproduces) are reserved; a data
    # set recorded before the recorder passed over them holds them, and its other episodes are still trained on.
    assert 0 in reserved_seeds() and 32 in reserved_seeds() and 50 not in reserved_seeds()
    checked = check_skill_data([_stand_in(tmp_path / "old", seeds=(0, 50, 32, 51))])
    assert checked.episodes == [[1, 3]] and checked.dropped_reserved == 2 and checked.dropped_failed == 0
    assert checked.describe()["dropped_reserved"] == 2
    # a held-out --val set is not trained on: nothing of it is left out
    val = check_skill_data([_stand_in(tmp_path / "val", seeds=(32, EVAL_SEED_BASE))], option="--val")
    assert val.episodes == [[0, 1]] and val.dropped_reserved == 0
    done = _invoke("--data", str(_stand_in(tmp_path / "all", seeds=(0, 32))), "--out", str(tmp_path / "run"))
    _one_error_line(done, EXIT_BAD_INPUT, "all of its 2 episodes are on scene seeds an evaluation plays")
    assert not (tmp_path / "run").exists()


def test_an_output_that_cannot_be_written_or_holds_a_run_is_refused(tmp_path: Path) -> None:
    data = str(_stand_in(tmp_path / "pick"))
    _one_error_line(_invoke("--data", data, "--out", "/proc/homie-run"), EXIT_BAD_INPUT, "cannot write --out")
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("")
    _one_error_line(_invoke("--data", data, "--out", str(used)), EXIT_BAD_INPUT, "is not empty", "--resume")
    _one_error_line(_invoke("--data", data, "--out", str(tmp_path / "new"), "--resume"), EXIT_BAD_INPUT,
                    "holds no checkpoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pick", "used"]


def test_without_lerobot_one_line_exit_1_and_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lerobot", None)
    monkeypatch.setitem(sys.modules, "lerobot.datasets.lerobot_dataset", None)
    monkeypatch.setitem(sys.modules, "lerobot.policies.act.modeling_act", None)
    done = _invoke("--data", str(_stand_in(tmp_path / "pick")), "--out", str(tmp_path / "run"))
    _one_error_line(done, EXIT_ENVIRONMENT, "needs LeRobot", "docs/skill-data.md")
    assert not (tmp_path / "run").exists()


def test_a_resumed_run_reads_the_batches_an_uninterrupted_one_reads() -> None:
    whole = list(_StepBatches(13, 4, seed=3, first=0, last=10))
    assert [len(b) for b in whole] == [4] * 10
    assert list(_StepBatches(13, 4, seed=3, first=6, last=10)) == whole[6:]
    # Every epoch (3 batches of a 13-sample permutation) draws distinct samples; another seed, another order.
    assert all(len(set(sum(whole[e * 3:e * 3 + 3], []))) == 12 for e in range(3))
    assert list(_StepBatches(13, 4, seed=4, first=0, last=10)) != whole
    assert list(_StepBatches(2, 4, seed=0, first=0, last=1))[0] in ([0, 1, 0, 1], [1, 0, 1, 0])


# ---------------------------------------------------------------------------------------------- with LeRobot

LEROBOT_REASON = "lerobot is not importable (lerobot[dataset,training]==0.6.1 needs Python >= 3.12: docs/skill-data.md)"


@pytest.fixture(scope="module")
def pick_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import lerobot.policies.act.modeling_act  # noqa: F401
    except ImportError:
        pytest.skip(LEROBOT_REASON)
    from homiebot.data.skill_datasets import record_skill_dataset

    out = tmp_path_factory.mktemp("skill") / "pick"
    record_skill_dataset("pick", 2, out, size=32)
    return out


def _losses(run: Path, kind: str = "train") -> list[tuple[int, float]]:
    lines = map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
    return [(m["step"], m["loss" if kind == "train" else "l1_loss"]) for m in lines if m["kind"] == kind]


@pytest.mark.slow
def test_a_tiny_act_trains_resumes_as_if_never_stopped_and_loads_with_lerobot(pick_data: Path, tmp_path: Path) -> None:
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors
    from safetensors.torch import load_file

    from homiebot.skills.learned import SkillPolicy

    # A validation set: the same frames under held-out seeds (what is checked here is the mechanism, not a score).
    val = tmp_path / "val"
    shutil.copytree(pick_data, val)
    records = [json.loads(line) for line in (val / EPISODES_FILE).read_text().splitlines()]
    (val / EPISODES_FILE).write_text("".join(json.dumps({**r, "seed": EVAL_SEED_BASE + r["seed"], "split": "eval"})
                                             + "\n" for r in records))
    common = ["--data", str(pick_data), "--preset", "tiny", "--max-steps", "4", "--batch-size", "4",
              "--save-every", "2", "--val", str(val)]
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    done = _invoke(*common, "--out", str(whole))
    assert done.exit_code == 0, done.output
    assert "step 4/4: loss" in done.stderr and "step 2/4: held-out L1" in done.stderr and "policy in" in done.stdout
    done = _invoke(*common, "--out", str(pieces), "--stop-after-steps", "3")
    assert done.exit_code == 0 and "continue with --resume" in done.stdout, done.output
    assert (pieces / "checkpoints" / "last").resolve().name == "000003"
    assert [s for s, _ in _losses(pieces)] == [1, 2, 3]
    done = _invoke(*common, "--out", str(pieces), "--resume")
    assert done.exit_code == 0, done.output
    assert "steps 4-4 (1 this run)" in done.stdout
    assert "resumed with the run's own settings: preset tiny, batch 4, lr 0.0001, seed 0" in done.stdout

    # The resumed run is the uninterrupted one: the same losses, bit-identical weights (same machine and threads).
    assert _losses(pieces) == _losses(whole) and [s for s, _ in _losses(whole)] == [1, 2, 3, 4]
    # Validation draws no random numbers: it does not change the run (the piece also validated at its step 3).
    assert [s for s, _ in _losses(whole, "val")] == [2, 4] and [s for s, _ in _losses(pieces, "val")] == [2, 3, 4]
    assert _losses(whole, "val")[1] == _losses(pieces, "val")[2] and all(0 < v < 10 for _, v in _losses(whole, "val"))
    a, b = load_file(whole / "policy" / "model.safetensors"), load_file(pieces / "policy" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    checkpoints = sorted(p.name for p in (pieces / "checkpoints").iterdir())
    assert checkpoints == ["000003", "000004", "last"]  # the newest two, no temporaries

    # Ctrl-C (SIGINT) during step 2: the step ends, a checkpoint is written, the piece stops; --resume finishes it.
    interrupted = tmp_path / "interrupted"
    settings = SkillTrainSettings(preset="tiny", max_steps=4, batch_size=4, save_every=10)

    def interrupt(entry: StepLog) -> None:
        if entry.step == 2:
            signal.raise_signal(signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    result = train_skill_policy(check_skill_data([pick_data]), check_out(interrupted, False), settings,
                                progress=interrupt)
    assert not result.finished and result.steps == 2
    assert (interrupted / "checkpoints" / "last").resolve().name == "000002"
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is put back
    done = _invoke(*common[:-2], "--out", str(interrupted), "--resume")
    assert done.exit_code == 0, done.output
    assert _losses(interrupted) == _losses(whole)
    for name in ("000003", "000004"):
        state = pieces / "checkpoints" / name / "training_state"
        assert json.loads((state / "training_step.json").read_text())["step"] == int(name)
        assert (state / "optimizer_state.safetensors").is_file() and (state / "rng_state.safetensors").is_file()
    assert (whole / "loss.png").stat().st_size > 1000
    record = json.loads((whole / "training.json").read_text())
    assert record["finished"] and record["steps"] == 4 and record["data"]["skills"] == ["pick"]

    # LeRobot loads the folder and acts from one of the data set's frames.
    policy = ACTPolicy.from_pretrained(whole / "policy")
    pre, post = make_pre_post_processors(policy.config, pretrained_path=str(whole / "policy"))
    frame = LeRobotDataset("homiebot/pick", root=pick_data, video_backend="pyav")[0]
    observation = {k: v for k, v in frame.items() if k.startswith("observation.")}
    policy.eval()
    with torch.no_grad():
        action = post(policy.select_action(pre(observation)))
    assert tuple(action.shape) == (1, 10) and torch.isfinite(action).all()
    assert policy.config.pretrained_backbone_weights is None and policy.config.chunk_size == 5

    # The stack's SkillPolicy: the same folder, observations as the recorder gives them (H x W x 3 uint8, the state).
    learned = SkillPolicy(whole / "policy")
    assert learned.inputs.images == {"head": (3, 32, 32), "wrist": (3, 32, 32)} and learned.inputs.action_size == 10
    images = {k[len("observation.images."):]: (v.numpy().transpose(1, 2, 0) * 255).round().astype(np.uint8)
              for k, v in observation.items() if k.startswith("observation.images.")}
    state = observation["observation.state"].numpy()
    target = observation["observation.environment_state"].numpy()
    assert learned.inputs.env_state_size == 6
    learned.reset()
    actions = [learned.act(images, state, target) for _ in range(6)]  # a chunk of 5, then the next one
    assert all(a.shape == (10,) and np.isfinite(a).all() for a in actions)
    assert np.allclose(actions[0], action.numpy()[0], atol=1e-3)
    with pytest.raises(SkillPolicyError, match="takes camera 'wrist'"):
        learned.act({"head": images["head"]}, state, target)
    with pytest.raises(SkillPolicyError, match="takes 32x32x3 images"):
        learned.act({**images, "head": np.zeros((64, 64, 3), np.uint8)}, state, target)
    with pytest.raises(SkillPolicyError, match="state of 10 values"):
        learned.act(images, state[:3], target)
    with pytest.raises(SkillPolicyError, match="environment state .* of 6 values, given None"):
        learned.act(images, state)


def test_a_folder_that_is_no_policy_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SkillPolicyError, match="is not a folder"):
        read_inputs(tmp_path / "missing")
    with pytest.raises(SkillPolicyError, match="not a LeRobot policy folder"):
        read_inputs(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(SkillPolicyError, match="does not describe a LeRobot policy"):
        read_inputs(tmp_path)

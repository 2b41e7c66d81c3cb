"""``homie train skill``: a LeRobot policy (ACT) for one physical skill, trained on the CPU from the skill data sets
that ``homie data skills`` writes (docs/skill-data.md, "Training a skill policy").

Everything model-side is LeRobot's own (0.6.1): the policy and its pre/post-processors come from LeRobot's factories
(``make_policy``, ``make_pre_post_processors``) built from the data set's metadata and statistics, frames and ACT's
action chunks are read by ``LeRobotDataset`` with the delta timestamps LeRobot derives from the policy's config
(``resolve_delta_timestamps``), the optimizer is the policy's own preset (AdamW, the backbone's parameter group) with
its gradient clipping, and checkpoints use LeRobot's layout and writers: ``policy.save_pretrained`` and the
processors' ``save_pretrained`` into ``pretrained_model/``, ``save_training_state`` (step, optimizer, RNG states) into
``training_state/``. So ``OUT/policy`` (and every checkpoint's ``pretrained_model``) is a folder LeRobot loads
(``ACTPolicy.from_pretrained(dir)``, ``make_pre_post_processors(cfg, pretrained_path=dir)``).

Only ACT: LeRobot's diffusion policy needs ``lerobot[diffusion]`` (diffusers), which the project does not install.
The vision backbone (ResNet-18) is randomly initialised and trained from scratch at the data set's own image size
(``pretrained_backbone_weights=None``: LeRobot's default would download ImageNet weights, and nothing is downloaded
here). One thread by default (``threads``).

Layout of ``OUT``:

* ``checkpoints/<step>/{pretrained_model,training_state}/`` every ``save_every`` steps, at the last step and after a
  step during which SIGINT or SIGTERM came (Ctrl-C: the piece ends there, resumable; the
  newest :data:`KEEP_CHECKPOINTS` kept), ``checkpoints/last`` a link to the newest, as ``lerobot-train`` lays them
  out. A checkpoint is written into a hidden temporary folder and renamed into place, so a crash or Ctrl-C never
  leaves a half-written one; ``resume=True`` continues from ``last``.
* ``policy/``: the newest checkpoint's ``pretrained_model`` (written the same way), the folder to serve.
* ``metrics.jsonl``: one line per step (loss and ACT's parts, learning rate, wall and CPU seconds of the step with
  its batch's loading, and the loading's wall seconds apart);
  a resumed run first drops the lines after its checkpoint's step. ``loss.png``: the loss curve drawn from it.
* ``training.json``: the run's settings, its data (folders, skills, episodes used), steps done, finished or not.

**Determinism and resuming.** ``seed`` fixes the weights' initialisation and the order of the samples: step ``s``
takes the ``s``-th batch of a per-epoch permutation drawn from ``(seed, epoch)`` alone, so a resumed run reads the
same batches as an uninterrupted one, and LeRobot's RNG state (Python, NumPy, torch: ACT's dropout and its VAE's
sampling) is restored from the checkpoint. On the same machine and thread count a run stopped and resumed ends with
the same weights as one that was not (a test checks the losses).

**What is trained on.** The data sets' successful episodes only (a failed execution is no demonstration; the
episodes' ``success`` in ``meta/homiebot_episodes.jsonl``), unless ``keep_failed``. Evaluation episodes (seeds of
the held-out split, :func:`homiebot.data.skill_datasets.split_of`) are refused: a data set that holds any cannot be
trained on. Episodes played on a scene seed an evaluation plays (:func:`homiebot.tasks.reserved.reserved_seeds`)
are left out, like failed ones, and counted: the recorder passes over those seeds, but a data set recorded before it
did holds them, and on some of them the recorded scene is an evaluation's own (docs/skill-data.md). Left out rather
than refused, because the rest of such a data set is sound training data; ``--val`` sets keep them (they are not
trained on). Several data sets can be given: their skills must share inputs and outputs (Pick, Open and Close move
the arm; Go to the base), their image sizes and frame rate must agree; the normalisation statistics are LeRobot's
aggregate of theirs. A policy's skills are those of its data; a resumed run must get data of the same skills.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from homiebot.data.skill_datasets import EPISODES_FILE, SKILLS, split_of
from homiebot.files import atomic_write_json, publish
from homiebot.tasks.reserved import reserved_seeds
from homiebot.training.progress import append_metrics, read_metrics, truncate_metrics

log = logging.getLogger(__name__)

#: The policies this command trains (LeRobot's policy type names).
POLICIES = ("act",)
#: Sizes of ACT (LeRobot's ACTConfig fields): ``cpu`` a small ACT for 2 CPU cores, ``tiny`` the CI test's.
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {"chunk_size": 20, "n_action_steps": 10, "dim_model": 256, "n_heads": 8, "dim_feedforward": 1024,
            "n_encoder_layers": 2, "n_decoder_layers": 1, "n_vae_encoder_layers": 2, "latent_dim": 32},
    "tiny": {"chunk_size": 5, "n_action_steps": 5, "dim_model": 32, "n_heads": 2, "dim_feedforward": 64,
             "n_encoder_layers": 1, "n_decoder_layers": 1, "n_vae_encoder_layers": 1, "latent_dim": 8},
}
#: Skills that share a policy's inputs and outputs (the arm's joints, or the base's velocity).
ACTION_SPACES = {"pick": "arm", "open": "arm", "close": "arm", "go_to": "base"}
CHECKPOINTS = "checkpoints"
LAST = "last"
POLICY_DIR = "policy"
PRETRAINED = "pretrained_model"
TRAINING_STATE = "training_state"
TRAINING_FILE = "training.json"
METRICS_FILE = "metrics.jsonl"
LOSS_PLOT = "loss.png"
#: Checkpoints kept (the newest).
KEEP_CHECKPOINTS = 2


class SkillTrainingError(ValueError):
    """A skill policy cannot be trained as asked (one line for the user)."""


class LeRobotMissing(SkillTrainingError):
    """LeRobot cannot be imported here (an environment problem, not the user's input)."""


@dataclass(frozen=True)
class SkillTrainSettings:
    policy: str = "act"
    preset: str = "cpu"
    max_steps: int = 2000
    batch_size: int = 8
    learning_rate: float = 1e-4
    save_every: int = 200
    seed: int = 0
    threads: int = 1
    keep_failed: bool = False


@dataclass
class SkillData:
    """The checked data sets (:func:`check_skill_data`)."""

    roots: list[Path]
    skills: list[str]
    episodes: list[list[int]]  # per data set: the episode indices trained on
    dropped_failed: int
    fps: int
    frames: int = 0
    features: dict[str, Any] = field(default_factory=dict)
    seeds: set[int] = field(default_factory=set)
    dropped_reserved: int = 0  # episodes on a scene seed an evaluation plays (the module docstring)

    def describe(self) -> dict[str, Any]:
        return {"roots": [str(r) for r in self.roots], "skills": self.skills,
                "episodes": [len(e) for e in self.episodes], "dropped_failed": self.dropped_failed,
                "dropped_reserved": self.dropped_reserved, "fps": self.fps}


@dataclass
class StepLog:
    step: int
    max_steps: int
    loss: float
    seconds: float
    kind: str = "train"  # or "val": the held-out L1 at a checkpoint


@dataclass
class SkillTrainResult:
    out: Path
    skills: list[str]
    steps: int
    first_step: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    seconds_per_step: float = 0.0
    parameters: int = 0
    frames: int = 0
    episodes: int = 0
    checkpoint_mb: float = 0.0
    finished: bool = True
    kept_settings: str = ""  # on --resume: the run's settings, which win over the options given

    def lines(self) -> list[str]:
        first = f"{self.losses[0]:.4f}" if self.losses else "n/a"
        last = f"{self.losses[-1]:.4f}" if self.losses else "n/a"
        done = self.steps - self.first_step
        return [
            *([f"resumed with the run's own settings: {self.kept_settings}"] if self.kept_settings else []),
            f"ACT for {'/'.join(self.skills)}: steps {self.first_step + 1}-{self.steps} ({done} this run) on "
            f"{self.episodes} episodes ({self.frames} frames) in {self.seconds:.1f} s ({self.seconds_per_step:.2f} "
            f"s/step), {self.parameters / 1e6:.2f} M parameters",
            f"  loss {first} -> {last}; policy in {self.out / POLICY_DIR} (checkpoint {self.checkpoint_mb:.1f} MB); "
            f"curve {self.out / LOSS_PLOT}",
            *([] if self.finished else [f"  stopped early with a checkpoint: continue with --resume --out {self.out}"]),
        ]


def require_lerobot() -> None:
    """:class:`LeRobotMissing` (one line, with how to get it) where LeRobot's policies cannot be imported."""
    try:
        import lerobot.datasets.lerobot_dataset  # noqa: F401
        import lerobot.policies.act.modeling_act  # noqa: F401
    except ImportError as err:
        raise LeRobotMissing(
            f"training a skill policy needs LeRobot (lerobot[dataset,training]==0.6.1, Python >= 3.12), which this "
            f"Python cannot import ({err}); see docs/skill-data.md"
        ) from None


def _episode_records(root: Path, option: str) -> list[dict[str, Any]]:
    path = root / EPISODES_FILE
    if not path.is_file():
        raise SkillTrainingError(f"{option} {root}: no {EPISODES_FILE}; not a data set of homie data skills")
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SkillTrainingError(f"{option} {root}: {EPISODES_FILE} is not JSON lines ({err})") from None


def _info(root: Path, option: str) -> dict[str, Any]:
    path = root / "meta" / "info.json"
    if not path.is_file():
        raise SkillTrainingError(f"{option} {root}: no meta/info.json; not a LeRobot data set (homie data skills writes one)")
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SkillTrainingError(f"{option} {root}: meta/info.json is not JSON ({err})") from None


def check_skill_data(roots: Sequence[Path], skills: Sequence[str] = (), keep_failed: bool = False,
                     option: str = "--data") -> SkillData:
    """Check the data sets before anything is written: each is a LeRobot data set of ``homie data skills``, of the
    ``skills`` asked for (all of one action space when none are), recorded on training seeds only (``option`` "--data";
    a ``--val`` set may hold any), with the same frame rate and features; returns the episodes to train on."""
    if not roots:
        raise SkillTrainingError(f"give at least one {option} folder")
    for skill in skills:
        if skill not in SKILLS:
            raise SkillTrainingError(f"unknown --skill {skill!r}; use one of {', '.join(SKILLS)}")
    resolved: list[Path] = []
    found: list[str] = []
    episodes: list[list[int]] = []
    dropped = 0
    dropped_reserved = 0
    reserved = reserved_seeds() if option == "--data" else {}
    fps: set[int] = set()
    shapes: dict[str, Any] | None = None
    frames = 0
    seeds: set[int] = set()
    for given in roots:
        root = Path(given).expanduser().absolute()
        if not root.exists():
            raise SkillTrainingError(f"{option} {root} does not exist")
        if not root.is_dir():
            raise SkillTrainingError(f"{option} {root} is not a folder")
        if root in resolved:
            raise SkillTrainingError(f"{option} {root} is given twice")
        info = _info(root, option)
        records = _episode_records(root, option)
        if not records:
            raise SkillTrainingError(f"{option} {root} holds no episodes")
        kinds = sorted({str(r.get("skill")) for r in records})
        unknown = [k for k in kinds if k not in SKILLS]
        if unknown:
            raise SkillTrainingError(f"{option} {root}: episodes of unknown skill {unknown[0]!r}")
        if skills and set(kinds) - set(skills):
            other = sorted(set(kinds) - set(skills))
            raise SkillTrainingError(
                f"{option} {root} holds {'/'.join(other)} episodes, not of the policy's skill ({'/'.join(skills)})"
            )
        spaces = {ACTION_SPACES[k] for k in [*found, *kinds]}
        if len(spaces) > 1:
            raise SkillTrainingError(
                f"{option} {root}: the data sets mix skills of different inputs and outputs "
                f"({', '.join(dict.fromkeys([*found, *kinds]))}): one policy moves the arm (pick, open, close) or the "
                "base (go_to)"
            )
        held_out = [int(r["seed"]) for r in records if split_of(int(r["seed"])) == "eval"]
        if held_out and option == "--data":
            raise SkillTrainingError(
                f"{option} {root} holds {len(held_out)} evaluation episodes (seeds {min(held_out)}-{max(held_out)}, "
                "held-out placements), which are never trained on; record training data with --split train"
            )
        if int(info.get("total_episodes", len(records))) != len(records):
            raise SkillTrainingError(
                f"{option} {root}: {EPISODES_FILE} lists {len(records)} episodes, LeRobot's meta/info.json "
                f"{info.get('total_episodes')}"
            )
        sound = [i for i, r in enumerate(records) if int(r["seed"]) not in reserved]
        dropped_reserved += len(records) - len(sound)
        keep = [i for i in sound if keep_failed or records[i].get("success")]
        dropped += len(sound) - len(keep)
        if not sound:
            raise SkillTrainingError(
                f"{option} {root}: all of its {len(records)} episodes are on scene seeds an evaluation plays "
                "(homiebot.tasks.reserved); record it again with today's homie data skills, which passes over them"
            )
        if not keep:
            raise SkillTrainingError(
                f"{option} {root}: none of its {len(records)} episodes succeeded; nothing to imitate (--keep-failed "
                "trains on failed ones too)"
            )
        features = {k: tuple(v.get("shape", ())) for k, v in info.get("features", {}).items()
                    if k == "action" or k.startswith("observation.")}
        if shapes is not None and features != shapes:
            raise SkillTrainingError(
                f"{option} {root}: its inputs and outputs differ from the first data set's (another image size?): "
                f"{features} against {shapes}"
            )
        shapes = features
        fps.add(int(info.get("fps", 0)))
        frames += sum(int(records[i].get("frames", 0)) for i in keep)
        seeds.update(int(r["seed"]) for r in records)
        resolved.append(root)
        found.extend(k for k in kinds if k not in found)
        episodes.append(keep)
    if len(fps) > 1:
        raise SkillTrainingError(f"the data sets have different frame rates ({sorted(fps)} fps)")
    return SkillData(resolved, found, episodes, dropped, fps.pop(), frames, dict(shapes or {}), seeds,
                     dropped_reserved)


def check_validation(roots: Sequence[Path], train: SkillData) -> SkillData:
    """The ``--val`` data sets: of the training data's skills, inputs and outputs, and no placement (seed) in common
    with it (held-out placements: ``homie data skills --split eval``)."""
    val = check_skill_data(roots, train.skills, option="--val")
    if val.features != train.features:
        raise SkillTrainingError(f"--val: its inputs and outputs differ from --data's: {val.features} against "
                                 f"{train.features}")
    shared = sorted(val.seeds & train.seeds)
    if shared:
        raise SkillTrainingError(
            f"--val shares {len(shared)} placements (seeds {shared[0]}...) with --data: a validation set must be "
            "held out (homie data skills --split eval)"
        )
    return val


def check_out(out: Path, resume: bool) -> Path:
    """The output folder: new or empty for a fresh run; one with a checkpoint for ``resume``."""
    out = Path(out).expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise SkillTrainingError(f"--out {out} exists and is not a folder")
    if resume:
        if not (out / CHECKPOINTS / LAST / TRAINING_STATE).is_dir():
            raise SkillTrainingError(f"--resume: {out} holds no checkpoint ({CHECKPOINTS}/{LAST})")
    elif out.is_dir() and any(out.iterdir()):
        raise SkillTrainingError(f"--out {out} is not empty; give --resume to continue its run, or another --out")
    return out


def settings_problem(settings: SkillTrainSettings) -> str | None:
    if settings.policy not in POLICIES:
        return (f"unknown --policy {settings.policy!r}; this stack trains {', '.join(POLICIES)} (LeRobot's diffusion "
                "policy needs lerobot[diffusion], which the project does not install)")
    if settings.preset not in PRESETS:
        return f"unknown --preset {settings.preset!r}; use one of {', '.join(PRESETS)}"
    for name in ("max_steps", "batch_size", "save_every", "threads"):
        if getattr(settings, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(settings, name)}"
    if not (settings.learning_rate > 0 and math.isfinite(settings.learning_rate)):
        return f"--lr must be more than 0, got {settings.learning_rate}"
    return None


def policy_config(settings: SkillTrainSettings) -> Any:
    """LeRobot's ACTConfig for ``settings``: the preset's sizes, a randomly initialised backbone, the CPU."""
    from lerobot.configs.types import NormalizationMode
    from lerobot.policies.act.configuration_act import ACTConfig

    config = ACTConfig(device="cpu", pretrained_backbone_weights=None, push_to_hub=False,
                       optimizer_lr=settings.learning_rate, optimizer_lr_backbone=settings.learning_rate,
                       **PRESETS[settings.preset])
    # The target's box (observation.environment_state, metres) is normalised like the joints: ACT's mapping leaves
    # the ENV type out, which would feed it raw.
    config.normalization_mapping = {**config.normalization_mapping, "ENV": NormalizationMode.MEAN_STD}
    return config


class _StepBatches:
    """Batch ``s`` of the run (0-based) is the ``s``-th of a permutation per epoch drawn from ``(seed, epoch)`` alone:
    a resumed run reads the same batches from any step (module docstring)."""

    def __init__(self, size: int, batch: int, seed: int, first: int, last: int) -> None:
        self.size, self.batch, self.seed, self.first, self.last = size, batch, seed, first, last
        self.per_epoch = max(1, size // batch)

    def __iter__(self) -> Iterator[list[int]]:
        import numpy as np

        epoch, order = -1, None
        for step in range(self.first, self.last):
            if step // self.per_epoch != epoch:
                epoch = step // self.per_epoch
                order = np.random.default_rng([self.seed, epoch]).permutation(self.size)
            assert order is not None
            start = (step % self.per_epoch) * self.batch
            chosen = order[start:start + self.batch]
            if len(chosen) < self.batch:  # fewer samples than one batch: draw the rest again
                chosen = np.resize(order, self.batch)
            yield [int(i) for i in chosen]

    def __len__(self) -> int:
        return max(0, self.last - self.first)


def _write_atomically(target: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` into a hidden folder beside ``target``, then renamed onto it (an old one replaced)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        write(tmp)
        publish(tmp)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rename(target, old / target.name)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _point_last(checkpoints: Path, name: str) -> None:
    link = checkpoints / LAST
    tmp = checkpoints / f".{LAST}.tmp-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(name)
    os.replace(tmp, link)


def _step_name(step: int, max_steps: int) -> str:
    return f"{step:0{max(6, len(str(max_steps)))}d}"


def plot_loss(metrics: Sequence[dict[str, Any]], out: Path) -> Path | None:
    """``loss.png``: the training loss (and ACT's L1 part) per step, from ``metrics.jsonl``'s lines."""
    rows = [m for m in metrics if m.get("kind") == "train" and m.get("loss") is not None]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    steps = [m["step"] for m in rows]
    axes.plot(steps, [m["loss"] for m in rows], label="loss (L1 + KL weight x KL)", linewidth=1)
    if all(m.get("l1_loss") is not None for m in rows):
        axes.plot(steps, [m["l1_loss"] for m in rows], label="L1 of the action chunk (normalised)", linewidth=1)
    val = [m for m in metrics if m.get("kind") == "val" and m.get("l1_loss") is not None]
    if val:
        axes.plot([m["step"] for m in val], [m["l1_loss"] for m in val], "o-", label="held-out L1 (--val)")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("loss")
    if min(m["loss"] for m in rows) > 0:
        axes.set_yscale("log")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = out / LOSS_PLOT
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


#: Frames of the validation data scored at each checkpoint (evenly spaced over it), and their batch.
VAL_FRAMES = 256
VAL_BATCH = 16


def _validation(val: SkillData, cfg: Any, pre: Any, policy: Any) -> Callable[[], float]:
    """A function giving ACT's L1 on the action chunks of :data:`VAL_FRAMES` held-out frames, in evaluation mode (no
    dropout, the VAE's latent at zero, as when acting); it draws no random numbers, so it does not change the run."""
    import torch
    from torch.utils.data import default_collate

    dataset, _meta, _stats = _datasets(val, cfg)
    count = min(VAL_FRAMES, len(dataset))
    chosen = sorted({round(i * (len(dataset) - 1) / max(1, count - 1)) for i in range(count)})

    def validate() -> float:
        policy.eval()
        total, weight = 0.0, 0
        with torch.no_grad():
            for start in range(0, len(chosen), VAL_BATCH):
                part = chosen[start:start + VAL_BATCH]
                _loss, parts = policy.forward(pre(default_collate([dataset[i] for i in part])))
                total += float(parts["l1_loss"]) * len(part)
                weight += len(part)
        policy.train()
        return total / max(1, weight)

    return validate


def _datasets(data: SkillData, cfg: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The frames to train on (LeRobot data sets with ACT's delta timestamps, concatenated), the first data set's
    metadata (features) and the aggregated statistics."""
    import torch
    from lerobot.datasets.compute_stats import aggregate_stats
    from lerobot.datasets.factory import resolve_delta_timestamps
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

    metas = [LeRobotDatasetMetadata(f"homiebot/{data.skills[0]}", root=root) for root in data.roots]
    deltas = resolve_delta_timestamps(cfg, metas[0])
    parts = [LeRobotDataset(f"homiebot/{data.skills[0]}", root=root, episodes=eps, delta_timestamps=deltas,
                            video_backend="pyav") for root, eps in zip(data.roots, data.episodes, strict=True)]
    stats = metas[0].stats if len(metas) == 1 else aggregate_stats([m.stats for m in metas])
    dataset = parts[0] if len(parts) == 1 else torch.utils.data.ConcatDataset(parts)
    return dataset, metas[0], stats


def train_skill_policy(
    data: SkillData,
    out: Path,
    settings: SkillTrainSettings,
    *,
    resume: bool = False,
    stop_after_steps: int | None = None,
    progress: Callable[[StepLog], None] | None = None,
    val: SkillData | None = None,
) -> SkillTrainResult:
    """Train (or resume) a policy on checked data (:func:`check_skill_data`) into ``out`` (:func:`check_out`)."""
    import torch
    from lerobot.common.train_utils import load_training_state, save_training_state
    from lerobot.policies.factory import make_policy, make_pre_post_processors
    from lerobot.utils.random_utils import set_seed
    from safetensors.torch import load_model

    started = time.perf_counter()
    out = Path(out)
    record_path = out / TRAINING_FILE
    previous: dict[str, Any] = {}
    if resume:
        previous = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
        had = previous.get("data", {}).get("skills")
        if had is not None and sorted(had) != sorted(data.skills):
            raise SkillTrainingError(
                f"--resume: the run in {out} trains a {'/'.join(had)} policy; the data given is "
                f"{'/'.join(data.skills)}"
            )
        kept = previous.get("settings")
        if kept is not None:
            settings = SkillTrainSettings(**{**kept, "max_steps": settings.max_steps, "save_every": settings.save_every,
                                             "threads": settings.threads})
    torch.set_num_threads(settings.threads)
    set_seed(settings.seed)
    cfg = policy_config(settings)
    dataset, meta, stats = _datasets(data, cfg)
    policy = make_policy(cfg, ds_meta=meta)
    pre, post = make_pre_post_processors(cfg, dataset_stats=stats)
    optimizer_cfg = cfg.get_optimizer_preset()
    optimizer = optimizer_cfg.build(policy.get_optim_params())
    checkpoints = out / CHECKPOINTS
    first_step = 0
    if resume:
        last = (checkpoints / LAST).resolve()
        load_model(policy, str(last / PRETRAINED / "model.safetensors"))
        first_step, optimizer, _ = load_training_state(last, optimizer, None)
        truncate_metrics(out / METRICS_FILE, first_step)
    if first_step >= settings.max_steps:
        raise SkillTrainingError(
            f"--resume: the run in {out} is at step {first_step}, --max-steps {settings.max_steps}; give more steps"
        )
    out.mkdir(parents=True, exist_ok=True)
    parameters = sum(p.numel() for p in policy.parameters())
    validate = _validation(val, cfg, pre, policy) if val is not None else None
    record = {
        "policy": settings.policy, "val": val.describe() if val is not None else None, "settings": asdict(settings), "data": data.describe(), "frames": data.frames,
        "parameters": parameters, "lerobot_policy_config": cfg.type, "steps": first_step, "finished": False,
        "seconds": float(previous.get("seconds", 0.0)),
    }
    atomic_write_json(record_path, record)
    sampler = _StepBatches(len(dataset), settings.batch_size, settings.seed, first_step, settings.max_steps)
    last_step = settings.max_steps if stop_after_steps is None else min(settings.max_steps, first_step + stop_after_steps)
    losses: list[float] = []
    times: list[float] = []
    step = first_step
    policy.train()
    # Batches are collated here, not by a DataLoader: its iterator draws a seed from torch's global RNG when it starts,
    # which a resumed run would draw after the checkpoint's RNG state was restored (no longer the same run).

    def save(step_now: int) -> None:
        name = _step_name(step_now, settings.max_steps)

        def write(tmp: Path) -> None:
            policy.save_pretrained(tmp / PRETRAINED)
            pre.save_pretrained(tmp / PRETRAINED)
            post.save_pretrained(tmp / PRETRAINED)
            save_training_state(tmp, step_now, optimizer, None, num_processes=1, batch_size=settings.batch_size)

        if validate is not None:
            l1 = validate()
            append_metrics(out / METRICS_FILE, {"kind": "val", "step": step_now, "l1_loss": l1, "time": time.time()})
            log.info("validation at step %d: L1 %.4f", step_now, l1)
            if progress is not None:
                progress(StepLog(step_now, settings.max_steps, l1, 0.0, kind="val"))
        _write_atomically(checkpoints / name, write)
        _point_last(checkpoints, name)
        _write_atomically(out / POLICY_DIR, lambda tmp: shutil.copytree(checkpoints / name / PRETRAINED, tmp,
                                                                         dirs_exist_ok=True))
        kept = sorted(p for p in checkpoints.iterdir() if p.is_dir() and not p.is_symlink() and p.name.isdigit())
        for old in kept[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)

    signalled: list[str] = []
    handlers: dict[signal.Signals, Any] = {}
    for wanted in (signal.SIGINT, signal.SIGTERM):
        try:
            handlers[wanted] = signal.signal(wanted, lambda num, _frame: signalled.append(signal.Signals(num).name))
        except ValueError:  # not the main thread: no handler; Ctrl-C then ends the run at its last checkpoint
            pass
    try:
        step = _steps(sampler, step, last_step, signalled, dataset, pre, policy, optimizer, optimizer_cfg, out,
                      settings, losses, times, progress, save)
    finally:
        for got, handler in handlers.items():
            signal.signal(got, handler)
    if signalled:
        log.warning("stopped after step %d (%s) with a checkpoint: continue with --resume", step, signalled[0])
    return _finish(out, record, record_path, started, step, first_step, settings, data, losses, times, parameters)


def _steps(sampler: _StepBatches, step: int, last_step: int, signalled: list[str], dataset: Any, pre: Any,
           policy: Any, optimizer: Any, optimizer_cfg: Any, out: Path, settings: SkillTrainSettings,
           losses: list[float], times: list[float], progress: Callable[[StepLog], None] | None,
           save: Callable[[int], None]) -> int:
    """The optimizer steps from ``step`` to ``last_step``; a checkpoint every ``save_every`` steps, at the last one,
    and after the step during which SIGINT or SIGTERM came (``signalled``), which ends the piece there."""
    import torch
    from torch.utils.data import default_collate

    for indices in sampler:
        if step >= last_step:
            break
        tick, cpu = time.perf_counter(), time.process_time()
        raw = default_collate([dataset[i] for i in indices])
        loaded = time.perf_counter() - tick
        batch = pre(raw)
        loss, parts = policy.forward(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), optimizer_cfg.grad_clip_norm)
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        seconds = time.perf_counter() - tick
        value = float(loss.detach())
        losses.append(value)
        times.append(seconds)
        append_metrics(out / METRICS_FILE, {
            "kind": "train", "step": step, "loss": value,
            **{k: float(v) for k, v in (parts or {}).items() if isinstance(v, (int, float))},
            "learning_rate": float(optimizer.param_groups[0]["lr"]), "step_wall_s": round(seconds, 4), "data_s": round(loaded, 4),
            "step_cpu_s": round(time.process_time() - cpu, 4), "time": time.time(),
        })
        if progress is not None:
            progress(StepLog(step, settings.max_steps, value, seconds))
        if step % settings.save_every == 0 or step == last_step or signalled:
            save(step)
        if signalled:
            break
    return step


def _finish(out: Path, record: dict[str, Any], record_path: Path, started: float, step: int, first_step: int,
            settings: SkillTrainSettings, data: SkillData, losses: list[float], times: list[float],
            parameters: int) -> SkillTrainResult:
    import statistics

    checkpoints = out / CHECKPOINTS
    plot_loss(read_metrics(out / METRICS_FILE), out)
    finished = step >= settings.max_steps
    elapsed = time.perf_counter() - started
    size = sum(p.stat().st_size for p in (checkpoints / LAST).resolve().rglob("*") if p.is_file())
    record.update(steps=step, finished=finished, seconds=round(record["seconds"] + elapsed, 2),
                  checkpoint_bytes=size)
    atomic_write_json(record_path, record)
    return SkillTrainResult(
        out=out, skills=data.skills, steps=step, first_step=first_step, losses=losses, seconds=elapsed,
        seconds_per_step=statistics.median(times[1:] or times) if times else 0.0, parameters=parameters,
        frames=data.frames, episodes=sum(len(e) for e in data.episodes), checkpoint_mb=size / 1e6, finished=finished,
        kept_settings=(f"preset {settings.preset}, batch {settings.batch_size}, lr {settings.learning_rate:g}, "
                       f"seed {settings.seed}" + (", failed episodes kept" if settings.keep_failed else ""))
        if first_step else "",
    )

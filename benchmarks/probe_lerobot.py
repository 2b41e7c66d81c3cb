"""Probe: can this install record a physical Pick as a LeRobot dataset with LeRobot's own writer, read it back, and
train a small LeRobot policy on it on the CPU? Prints the figures as one JSON object.

It needs ``lerobot`` (0.6.x, with its ``dataset`` and ``training`` extras; ``diffusion`` too for that policy) in the
interpreter that runs it, which the project's own venv does not have. A probe venv, as made on 2026-11-29
(docs/results/lerobot-install-2026-11-29.md; Python 3.12, and a CUDA build of torch from PyPI, several GB)::

    python3.12 -m venv /tmp/lr/venv312 && /tmp/lr/venv312/bin/pip install torch==2.11.0 torchvision==0.26.0 \
        "lerobot[dataset,training]==0.6.1"
    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 nice -n 19 /tmp/lr/venv312/bin/python benchmarks/probe_lerobot.py \
        --root /tmp/lr/ds [--policy act|diffusion] [--res 96] [--frames 40] [--steps 6] [--batch 8] [--images] \
        [--json OUT]

What it writes is what a physical Pick would record, per control step: two first-person camera images (``--res``
square, RGB), the arm's joint positions (torso lift, the seven arm joints, the two fingers: ten values, names from
``homiebot.sim.mujoco.robot`` when the project is importable), the joint position targets sent that step (the
action), the task text, and a per-frame success flag (``next.success``, true on the last frame of a successful
episode; ``next.done`` on each episode's last frame), the layout LeRobot's own evaluation script records. The
images are synthetic (a coloured disc moving over a gradient, so that video coding sees smooth content, not noise);
the joints follow a smooth reach-and-close path. Two episodes: the first succeeds, the second does not.

Then it reads the data set back (``LeRobotDataset(repo_id, root=...)``, frame count, one frame's shapes), builds the
policy from the data set's metadata with LeRobot's factories (``make_policy``, ``make_pre_post_processors``) with
no pretrained backbone (ACT's default would download ImageNet ResNet-18 weights from torchvision), and times
``--steps`` training steps (forward, backward, AdamW step) on batches from a ``torch.utils.data.DataLoader`` over the
data set; the first step is reported apart (one-time costs). Peak memory is the process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

try:  # the project's joint names; the same literal names when the project is not importable
    from homiebot.sim.mujoco.robot import ARM_JOINTS, FINGER_JOINTS

    JOINTS: tuple[str, ...] = ("torso_lift", *ARM_JOINTS, *FINGER_JOINTS)
except ImportError:  # pragma: no cover - only outside the project's install
    JOINTS = ("torso_lift", "shoulder_pan", "shoulder_lift", "upperarm_roll", "elbow_flex", "forearm_roll",
              "wrist_flex", "wrist_roll", "finger_left", "finger_right")

CAMERAS = ("front", "wrist")
FPS = 10


def _features(res: int, use_videos: bool) -> dict[str, dict[str, Any]]:
    visual = "video" if use_videos else "image"
    features: dict[str, dict[str, Any]] = {
        f"observation.images.{cam}": {"dtype": visual, "shape": (res, res, 3), "names": ["height", "width", "channels"]}
        for cam in CAMERAS
    }
    features["observation.state"] = {"dtype": "float32", "shape": (len(JOINTS),), "names": list(JOINTS)}
    features["action"] = {"dtype": "float32", "shape": (len(JOINTS),), "names": list(JOINTS)}
    features["next.success"] = {"dtype": "bool", "shape": (1,), "names": None}
    features["next.done"] = {"dtype": "bool", "shape": (1,), "names": None}
    return features


def _image(res: int, t: float, cam: int) -> np.ndarray:
    """A smooth synthetic view: a gradient with a disc whose place follows ``t`` in [0, 1]."""
    yy, xx = np.mgrid[0:res, 0:res].astype(np.float32) / res
    img = np.stack([xx, yy, 0.5 * (xx + yy)], axis=-1) * 160.0 + 40.0 * cam
    cx, cy = 0.2 + 0.6 * t, 0.5 + 0.2 * np.sin(3.0 * t + cam)
    disc = (xx - cx) ** 2 + (yy - cy) ** 2 < 0.01
    img[disc] = (220.0, 40.0, 40.0)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_dataset(root: Path, res: int, frames: int, use_videos: bool) -> tuple[Any, float]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if root.exists():
        shutil.rmtree(root)
    start = time.perf_counter()
    ds = LeRobotDataset.create(
        repo_id="homiebot/probe_pick", fps=FPS, features=_features(res, use_videos), root=root,
        robot_type="homiebot", use_videos=use_videos,
    )
    rng = np.random.default_rng(0)
    for episode, success in enumerate((True, False)):
        q = np.zeros(len(JOINTS), dtype=np.float32)
        goal = rng.uniform(-1.0, 1.0, len(JOINTS)).astype(np.float32)
        goal[-2:] = 0.0 if success else 0.04  # the fingers close on the object, or stay open on a miss
        for i in range(frames):
            t = i / max(frames - 1, 1)
            target = (q + 0.2 * (goal - q)).astype(np.float32)
            last = i == frames - 1
            ds.add_frame({
                **{f"observation.images.{cam}": _image(res, t, k + episode) for k, cam in enumerate(CAMERAS)},
                "observation.state": q.copy(),
                "action": target,
                "next.success": np.array([success and last]),
                "next.done": np.array([last]),
                "task": "pick up the apple from the kitchen counter",
            })
            q = target
        ds.save_episode()
    ds.finalize()
    return ds, time.perf_counter() - start


def read_back(root: Path) -> dict[str, Any]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    start = time.perf_counter()
    ds = LeRobotDataset("homiebot/probe_pick", root=root)
    item = ds[len(ds) - 1]
    return {
        "read_s": round(time.perf_counter() - start, 3),
        "episodes": ds.num_episodes,
        "frames": len(ds),
        "last_frame": {k: (list(v.shape) if hasattr(v, "shape") else v) for k, v in item.items()},
        "success_frames": int(sum(bool(ds[i]["next.success"]) for i in range(len(ds)))),
    }


def _policy_config(kind: str, res: int) -> Any:
    if kind == "act":
        from lerobot.policies.act.configuration_act import ACTConfig

        # Tiny ACT: the default ResNet-18 trunk, but random-initialised (no torchvision download), a small
        # transformer, and one-second action chunks.
        return ACTConfig(device="cpu", pretrained_backbone_weights=None, chunk_size=10, n_action_steps=10,
                         dim_model=128, n_heads=4, dim_feedforward=512, n_encoder_layers=2,
                         n_vae_encoder_layers=2, latent_dim=16, push_to_hub=False)
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

    crop = int(res * 0.875)
    return DiffusionConfig(device="cpu", pretrained_backbone_weights=None, crop_shape=(crop, crop), horizon=16,
                           n_action_steps=8, down_dims=(64, 128, 256), num_train_timesteps=100,
                           use_group_norm=True, push_to_hub=False)


def train_steps(root: Path, kind: str, res: int, steps: int, batch: int) -> dict[str, Any]:
    import torch
    from lerobot.datasets.factory import resolve_delta_timestamps
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata
    from lerobot.policies.factory import make_policy, make_pre_post_processors

    torch.manual_seed(0)
    meta = LeRobotDatasetMetadata("homiebot/probe_pick", root=root)
    cfg = _policy_config(kind, res)
    policy = make_policy(cfg, ds_meta=meta)
    pre, _post = make_pre_post_processors(cfg, dataset_stats=meta.stats)
    ds = LeRobotDataset("homiebot/probe_pick", root=root, delta_timestamps=resolve_delta_timestamps(cfg, meta))
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=0, drop_last=True)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    policy.train()
    times: list[float] = []
    losses: list[float] = []
    it = iter(loader)
    for _ in range(steps):
        try:
            raw = next(it)
        except StopIteration:
            it = iter(loader)
            raw = next(it)
        start = time.perf_counter()
        batch_in = pre(raw)
        loss, _ = policy.forward(batch_in)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - start)
        losses.append(float(loss.detach()))
    return {
        "policy": kind,
        "params": sum(p.numel() for p in policy.parameters()),
        "batch": batch,
        "threads": torch.get_num_threads(),
        "first_step_s": round(times[0], 3),
        "step_s_median_after_first": round(statistics.median(times[1:]), 3) if len(times) > 1 else None,
        "losses": [round(x, 4) for x in losses],
    }


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="data set folder (replaced)")
    parser.add_argument("--policy", choices=("act", "diffusion"), default="act")
    parser.add_argument("--res", type=int, default=96)
    parser.add_argument("--frames", type=int, default=40, help="frames per episode (10 fps)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--images", action="store_true", help="PNG frames instead of LeRobot's default MP4 video")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import lerobot
    import torch

    out: dict[str, Any] = {
        "python": sys.version.split()[0], "lerobot": lerobot.__version__, "torch": torch.__version__,
        "res": args.res, "frames_per_episode": args.frames, "videos": not args.images,
    }
    _, write_s = write_dataset(args.root, args.res, args.frames, not args.images)
    out["write_s"] = round(write_s, 3)
    out["dataset_bytes"] = _du(args.root)
    out["read"] = read_back(args.root)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["train"] = train_steps(args.root, args.policy, args.res, args.steps, args.batch)
    out["peak_rss_mib_before_train"] = round(rss_before / 1024, 1)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    text = json.dumps(out, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

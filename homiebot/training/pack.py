"""A training run's newest checkpoint, packed small enough to commit and resumed elsewhere (``homie train pack``).

A checkpoint of ``homie train sft`` holds the adapter, the optimizer, the scheduler, the RNG states and the trainer
state (data position, step, log). AdamW keeps two moments per trained weight in float32, so ``optimizer.pt`` is
twice the adapter (r 8 on every linear layer of SmolLM2-135M: 9.8 MB of adapter, 19.6 MB of moments). The pack
keeps everything a resume reads, with the moments cast to bfloat16: half the optimizer's bytes. Loading needs no
code of ours: ``torch.optim.Optimizer.load_state_dict`` casts every floating state tensor but ``step`` to its
parameter's dtype (torch's documented behaviour, ``_process_value_according_to_param_policy``), so transformers'
``Trainer`` resumes from the pack unchanged (``tests/training/test_pack.py`` resumes a real run from one). The
moments lose their low mantissa bits (bfloat16 keeps 8 of float32's 24): the resumed run's steps differ from the
uninterrupted run's by that rounding, not by a reset optimizer. The adapter stays float32, so the pack's weights
are the checkpoint's exactly.

Left out: the tokenizer's files (``homie train sft`` loads the tokenizer from the base model on resume) and
peft's README. ``metrics.jsonl`` of the run, up to the checkpoint's step, goes beside ``checkpoints/`` so that the
resumed run's curves start at step 1.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from homiebot.training.progress import METRICS_FILE, read_metrics
from homiebot.training.trainer import CHECKPOINTS, TrainingError

log = logging.getLogger(__name__)

OPTIMIZER_FILE = "optimizer.pt"
#: What a resume reads, besides the optimizer (transformers' Trainer._load_from_checkpoint and _load_rng_state).
KEPT_FILES = ("adapter_config.json", "adapter_model.safetensors", "scheduler.pt", "trainer_state.json",
              "training_args.bin")
RNG_GLOB = "rng_state*.pth"  # one per process of a distributed run


@dataclass(frozen=True)
class PackResult:
    checkpoint: Path
    step: int
    packed_bytes: int
    source_bytes: int
    moments_cast: int

    def lines(self) -> list[str]:
        return [
            f"packed checkpoint-{self.step}: {self.packed_bytes / 1e6:.1f} MB (the checkpoint: "
            f"{self.source_bytes / 1e6:.1f} MB; {self.moments_cast} optimizer moments as bfloat16) in {self.checkpoint}",
            f"  continue it with: homie train sft --out {self.checkpoint.parent.parent} --resume ...",
        ]


def newest_checkpoint(run: Path) -> tuple[Path, int]:
    """The newest ``checkpoints/checkpoint-N`` of a training output folder and its step N."""
    folder = run / CHECKPOINTS
    found = [(int(p.name[len("checkpoint-"):]), p) for p in folder.glob("checkpoint-*")
             if p.is_dir() and p.name[len("checkpoint-"):].isdigit()]
    if not found:
        raise TrainingError(f"--from {run}: no checkpoint ({folder}/checkpoint-N); is it a homie train output folder?")
    step, path = max(found)
    return path, step


def pack_checkpoint(run: str | Path, out: str | Path) -> PackResult:
    """Write ``run``'s newest checkpoint into ``out/checkpoints/checkpoint-N`` with the optimizer's moments in
    bfloat16 (module docstring). ``out`` must be new or empty; nothing is left there when packing fails."""
    import torch

    source = Path(run).expanduser().absolute()
    target = Path(out).expanduser().absolute()
    if not source.is_dir():
        raise TrainingError(f"--from {source}: no such folder")
    checkpoint, step = newest_checkpoint(source)
    missing = [name for name in (*KEPT_FILES, OPTIMIZER_FILE) if not (checkpoint / name).is_file()]
    if missing:
        raise TrainingError(f"{checkpoint}: not a whole checkpoint (missing {', '.join(missing)})")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise TrainingError(f"--out {target} is not empty; choose a new folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        packed = staging / CHECKPOINTS / checkpoint.name
        packed.mkdir(parents=True)
        for name in KEPT_FILES:
            shutil.copy2(checkpoint / name, packed / name)
        for rng in sorted(checkpoint.glob(RNG_GLOB)):
            shutil.copy2(rng, packed / rng.name)
        state = torch.load(checkpoint / OPTIMIZER_FILE, map_location="cpu", weights_only=True)
        cast = 0
        for per_parameter in state.get("state", {}).values():
            for key, value in per_parameter.items():
                # "step" stays as saved: torch keeps it float32 on load, whatever the parameter's dtype.
                if key != "step" and torch.is_tensor(value) and value.dtype == torch.float32:
                    per_parameter[key] = value.to(torch.bfloat16)
                    cast += 1
        torch.save(state, packed / OPTIMIZER_FILE)
        metrics = read_metrics(source / METRICS_FILE)
        if metrics:
            kept = [m for m in metrics if int(m.get("step", 0)) <= step]
            (staging / METRICS_FILE).write_text("".join(_json_line(m) for m in kept), encoding="utf-8")
        if target.exists():
            target.rmdir()  # empty (checked above): the rename needs the name free
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    from homiebot.files import publish
    from homiebot.training.trainer import publish_tree

    publish(target)  # made by mkdtemp (0700)
    publish_tree(target)
    result_dir = target / CHECKPOINTS / checkpoint.name
    return PackResult(
        checkpoint=result_dir,
        step=step,
        packed_bytes=_bytes(result_dir),
        source_bytes=_bytes(checkpoint),
        moments_cast=cast,
    )


def _json_line(entry: object) -> str:
    import json

    return json.dumps(entry) + "\n"


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())

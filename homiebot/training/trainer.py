"""``homie train sft|dpo|merge|base``: EMMOE's two training stages on trl and peft (EMMOE paper, section 4.2, G.1).

The paper's order: SFT with LoRA on the base model, merge the adapter, then DPO with a new LoRA adapter on the
merged SFT model, which is also the reference model (with a peft adapter trl scores the reference with the
adapter disabled, i.e. the merged SFT model itself). Presets (:data:`PRESETS`):

* ``emmoe``: the paper's settings for a 7B model on GPUs. SFT: LoRA r 128 / alpha 256 / dropout 0.05 on all
  linear layers, lr 5e-4, cosine, warm-up 3 %, weight decay 0, one epoch, global batch 64 (16 x 4
  accumulation here, 16 x 4 GPUs in the paper), bf16, gradient checkpointing, 2,048 tokens. DPO: LoRA r 8 /
  alpha 8, beta 0.1 (sigmoid loss), lr 5e-6, cosine, warm-up 3 %, max grad norm 0.3, one epoch, batch 16.
* ``cpu-small``: a small model (SmolLM2-135M) on 2 CPU cores. fp32 and no gradient checkpointing: trl's
  configs default to bf16 and checkpointing even on a CPU, which emulates bf16 and made a 135M model 6-15x
  slower (measured, docs/training.md); LoRA r 16 / alpha 32 (DPO r 8 / alpha 8), lr 5e-4 (DPO 5e-5: a few
  hundred steps, not the paper's thousands), batch 2, 1,024 tokens, one thread (two threads cost ~5x the CPU
  time per token on a loaded 2-core machine), **no warm-up** (:data:`CPU_WARMUP_STEPS`).

Warm-up: ``Preset.warmup_steps`` (``--warmup-steps N``) is a number of steps and overrides ``warmup_ratio``.
transformers rounds a ratio up to whole steps (``TrainingArguments.get_warmup_steps``), and its linear warm-up
gives step ``k`` the rate ``lr * k / warmup``, so the first step of any run with a warm-up trains at lr 0. The
paper's 3 % is 2 of its ~52 SFT steps and 17 of its ~562 DPO steps (global batch 64 over 3,316 samples, batch
16 over 8,984 pairs); 3 % of a 3-40-step CPU run is one step, its whole warm-up, spent at lr 0 (a 3-step DPO run
changed the weights twice, docs/results/training.md).

* ``cpu``: SFT to convergence on 2 CPU cores (multi-epoch; ``benchmarks/bench_train.py`` measured each choice,
  BENCHMARKS.md): the LM head on the answers only (:func:`_answer_loss_trainer`), bf16 autocast, LoRA r 16,
  episode samples one per process and micro-step, two processes with DDP over gloo (:func:`_launch`).

Runs are resumable: checkpoints go to ``OUT/checkpoints`` every ``save_steps`` (the newest kept: adapter,
optimizer, scheduler, RNG states, trainer state with the data position); ``resume=True`` continues from it.
A run goes in pieces (:class:`~homiebot.training.progress.StopRule`: after N steps, H hours, or a signal, a
checkpoint and a clean stop). The adapter (``adapter_config.json`` + weights + tokenizer) is saved in ``OUT``,
with ``OUT/training.json`` (preset, data, steps, losses, wall time, finished or not), ``OUT/metrics.jsonl`` and
the curves (:mod:`homiebot.training.progress`); with a validation set, offline next-subtask accuracy per epoch.

A bundled GGUF model cannot be trained (its weights are quantised): :func:`materialize_base` writes it out as
a trainable float folder first (``homie train base --model smollm2 --out DIR``; the GGUF loader's
``quantization_config`` has to be dropped before ``save_pretrained``, docs/training.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from homiebot.training.allocator import apply_allocator_settings
from homiebot.training.cpu_bf16 import native_cpu_bf16
from homiebot.training.episodes import TrainingDataError
from homiebot.training.progress import (
    METRICS_FILE,
    StopRule,
    append_metrics,
    metrics_callback,
    plot_curves,
    read_metrics,
    stop_callback,
    truncate_metrics,
    validation_callback,
)
from homiebot.training.sequences import TokenizedChat, is_episode_data, tokenize_rows

log = logging.getLogger(__name__)

Stage = Literal["sft", "dpo"]
TRAINING_FILE = "training.json"
CHECKPOINTS = "checkpoints"


class TrainingError(ValueError):
    """A training run that cannot start (bad data, model or output folder); the message says which."""


@dataclass(frozen=True)
class Preset:
    """One stage's settings."""

    name: str
    lora: bool = True
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: str | tuple[str, ...] = "all-linear"
    learning_rate: float = 5e-4
    batch_size: int = 4
    gradient_accumulation: int = 1
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    warmup_ratio: float = 0.03
    # Whole warm-up steps; when set it replaces warmup_ratio (0: the first step trains at the full rate).
    warmup_steps: int | None = None
    scheduler: str = "cosine"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    bf16: bool = False
    gradient_checkpointing: bool = False
    max_length: int = 1024
    beta: float = 0.1  # DPO
    #: DPO: weight of an NLL term on the chosen answer added to the sigmoid loss (0: plain DPO). Plain DPO can lower
    #: the chosen answer's likelihood too, as long as the rejected one falls faster (Pal et al. 2024, "Smaug", section
    #: 3); the NLL term holds the chosen answer up (Pang et al. 2024, "Iterative Reasoning Preference Optimization",
    #: eq. 1, weight 1 there). trl's "sft" loss: the token-mean NLL of the chosen side.
    sft_weight: float = 0.0
    optim: str = "adamw_torch"
    threads: int | None = None
    save_steps: int = 50
    logging_steps: int = 1
    seed: int = 0
    # SFT: the LM head only on the positions whose next token is learned (the answers), not on every prompt token
    # (:class:`AnswerLoss`); False keeps trl's own loss.
    answer_only_logits: bool = False
    # On a CPU: forward and backward under torch.autocast's bfloat16 (the weights and the optimizer stay fp32).
    cpu_bf16: bool = False
    # SFT: processes training side by side with torch's DistributedDataParallel (gloo on a CPU), each with
    # ``threads`` threads; the per-process gradient accumulation is divided by it to keep the global batch.
    processes: int = 1
    # Validation (with a --val data set): every this many optimizer steps; None: at the end of each epoch.
    eval_steps: int | None = None
    # Validation answers scored per evaluation (a fixed sample; None: all).
    val_limit: int | None = 200


#: The cpu-small presets' warm-up. A CPU run here is 3-100 steps at 12-35 s of CPU each; a 3 % warm-up is one
#: step at lr 0 (module docstring): CPU paid for no change. The warm-up guards the first Adam steps on the
#: pretrained weights; with LoRA those steps only move the adapter, whose B matrix starts at zero (Hu et al.
#: 2021, section 4.1), so the update starts small anyway. The GPU presets keep the papers' 3 %.
CPU_WARMUP_STEPS = 0

PRESETS: dict[tuple[str, str], Preset] = {
    ("sft", "emmoe"): Preset(
        "emmoe",
        lora_r=128,
        lora_alpha=256,
        learning_rate=5e-4,
        batch_size=16,
        gradient_accumulation=4,
        bf16=True,
        gradient_checkpointing=True,
        max_length=2048,
        save_steps=50_000,
    ),
    ("dpo", "emmoe"): Preset(
        "emmoe",
        lora_r=8,
        lora_alpha=8,
        learning_rate=5e-6,
        batch_size=16,
        max_grad_norm=0.3,
        bf16=True,
        gradient_checkpointing=True,
        max_length=2048,
        optim="paged_adamw_32bit",
        save_steps=1000,
        logging_steps=10,
    ),
    # EMMA's imitation stage (EMMA paper, Table 2): DPO beta 0.1, lr 5e-6, batch 16, 5 epochs per trial, 1,024 tokens.
    ("dpo", "emma"): Preset(
        "emma",
        lora_r=8,
        lora_alpha=8,
        learning_rate=5e-6,
        batch_size=16,
        epochs=5.0,
        max_length=1024,
        save_steps=10_000,
    ),
    # One thread: on a shared 2-core machine two OpenMP threads spent ~5x the CPU time per token waiting on each
    # other (measured, docs/training.md "Why a step was slow"). Batch 2 of ~400-token samples: a step is a few
    # CPU seconds.
    ("sft", "cpu-small"): Preset(
        "cpu-small",
        lora_r=16,
        lora_alpha=32,
        learning_rate=5e-4,
        batch_size=2,
        threads=1,
        warmup_steps=CPU_WARMUP_STEPS,
    ),
    # Multi-epoch SFT on 2 CPU cores (docs/training.md "SFT to convergence on 2 CPU cores"; BENCHMARKS.md, from
    # benchmarks/bench_train.py): one sample (an episode, --episodes data, or a round) per process and micro-step,
    # 4 per optimizer step (about 30 answers with episodes); LoRA r 8 on every linear layer (2.4 M weights: the
    # adapter 9.8 MB in fp32, a packed checkpoint about 20 MB, so that a piece can be committed and continued
    # elsewhere; full fine-tuning was only 9 % cheaper a step); the LM head on the answers
    # only (x1.55 less CPU); bf16 autocast (x1.65); two processes of one thread (DDP over gloo; two threads in one
    # process cost x4 the wall time); 2 epochs, 1.36-1.62 CPU s per answer: 6.4-7.6 CPU hours for 8,437 answers;
    # a checkpoint every 20 steps (about 15 minutes of CPU).
    ("sft", "cpu"): Preset(
        "cpu",
        lora_r=8,
        lora_alpha=16,
        learning_rate=3e-4,
        batch_size=1,
        gradient_accumulation=4,
        epochs=2.0,
        warmup_steps=5,
        # SmolLM2's context. Episodes now reach 3,691 tokens (the growing chat sends only the changed pieces; they
        # reached 5,500 when it re-sent the whole world): with batch 1 no sample is padded to it.
        max_length=8192,
        threads=1,
        save_steps=20,
        answer_only_logits=True,
        cpu_bf16=True,
        processes=2,
    ),
    # DPO on top of the cpu SFT adapter (homie train dpo --init-adapter), pairs prompted with episode chats
    # (homie data build dpo --episodes): one pair (its two sides, policy and reference) per micro-step in one
    # process of one thread, 4 per optimizer step; bf16 autocast; the paper's beta 0.1 and LoRA r 8 / alpha 8 (the
    # continued adapter keeps its own). The lr is the cpu-small DPO's: with a few hundred pairs the paper's 5e-6
    # over 562 steps would move nothing in the ~100 steps two cores afford.
    ("dpo", "cpu"): Preset(
        "cpu",
        lora_r=8,
        lora_alpha=8,
        learning_rate=5e-5,
        batch_size=1,
        gradient_accumulation=4,
        epochs=1.0,
        warmup_steps=CPU_WARMUP_STEPS,
        max_length=8192,
        threads=1,
        save_steps=10,
        cpu_bf16=True,
    ),
    ("dpo", "cpu-small"): Preset(
        "cpu-small",
        lora_r=8,
        lora_alpha=8,
        learning_rate=5e-5,
        batch_size=2,
        threads=1,
        warmup_steps=CPU_WARMUP_STEPS,
    ),
}


def preset_for(stage: Stage, name: str, **overrides: Any) -> Preset:
    """The preset ``name`` of ``stage`` with the given fields replaced (None keeps the preset's)."""
    warmup = overrides.get("warmup_steps")
    if warmup is not None and warmup < 0:
        raise TrainingError(f"--warmup-steps must be 0 or more, got {warmup}")
    try:
        preset = PRESETS[(stage, name)]
    except KeyError:
        names = sorted({n for _, n in PRESETS})
        raise TrainingError(f"unknown preset {name!r}; available: {', '.join(names)}") from None
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if preset.cpu_bf16 and "cpu_bf16" not in overrides:
        # The named preset's bf16 autocast only where it pays (cpu_bf16.py), decided on the machine that trains, so a
        # piece resumed elsewhere follows that machine; an explicit cpu_bf16 (a benchmark's) is kept as given.
        preset = resolve_cpu_bf16(preset, native_cpu_bf16())
    return replace(preset, **overrides)


def resolve_cpu_bf16(preset: Preset, native: bool | None) -> Preset:
    """``preset`` with ``cpu_bf16`` off when the CPU is known to lack native bf16 (``native`` False,
    :func:`~homiebot.training.cpu_bf16.native_cpu_bf16`); as it is otherwise. ``cpu_bf16`` acts on a CPU only (an
    accelerator's bf16 is ``Preset.bf16``), so turning it off changes nothing on a GPU."""
    if preset.cpu_bf16 and native is False:
        log.warning(
            "bf16 autocast off: this CPU has no native bf16 (no AVX-512 BF16, no AMX) and emulating it costs several "
            "times an fp32 step; training in fp32"
        )
        return replace(preset, cpu_bf16=False)
    return preset


@dataclass
class TrainResult:
    out: Path
    stage: str
    steps: int
    samples: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    seconds_per_step: float = 0.0
    trainable_parameters: int = 0
    log_history: list[dict[str, Any]] = field(default_factory=list)
    # Per optimizer step: wall seconds and this process's CPU seconds (all its threads). On a shared machine the
    # CPU time is the figure that does not depend on how many other jobs run beside it.
    step_seconds: list[float] = field(default_factory=list)
    step_cpu_seconds: list[float] = field(default_factory=list)
    # The learning rate each optimizer step applied (the warm-up's first step: 0).
    step_learning_rates: list[float] = field(default_factory=list)
    # False when this piece stopped early (StopRule, a signal) with a checkpoint: --resume continues it.
    finished: bool = True

    def lines(self) -> list[str]:
        first = f"{self.losses[0]:.4f}" if self.losses else "n/a"
        last = f"{self.losses[-1]:.4f}" if self.losses else "n/a"
        return [
            f"{self.stage}: {self.steps} steps on {self.samples} samples in {self.seconds:.1f} s "
            f"({self.seconds_per_step:.2f} s/step), {self.trainable_parameters:,} trainable parameters",
            f"  loss {first} -> {last}; adapter in {self.out}",
            *([] if self.finished else [f"  stopped early with a checkpoint: continue with --resume --out {self.out}"]),
        ]


def publish_tree(folder: Path) -> None:
    """Give what transformers, peft and safetensors wrote (some files 0600) the user's umask (docs/cli.md)."""
    from homiebot.files import publish

    for path in folder.rglob("*"):
        publish(path)


def _step_timer() -> Any:
    """A trainer callback timing each optimizer step (wall and process CPU seconds) and recording the learning
    rate the optimizer applied in it (read from the optimizer between its step and the scheduler's)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.wall: list[float] = []
            self.cpu: list[float] = []
            self.lr: list[float] = []
            self._start = (0.0, 0.0)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._start = (time.perf_counter(), time.process_time())

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            optimizer = kwargs.get("optimizer")
            if optimizer is not None:
                self.lr.append(float(optimizer.param_groups[0]["lr"]))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.wall.append(time.perf_counter() - self._start[0])
            self.cpu.append(time.process_time() - self._start[1])

    return StepTimer()


def _check_out(out: Path, resume: bool) -> Path:
    out = out.expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise TrainingError(f"output {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not resume:
        raise TrainingError(f"output {out} is not empty; give --resume to continue its run, or another --out")
    if resume and not (out / CHECKPOINTS).is_dir():
        raise TrainingError(f"--resume: {out} holds no checkpoints")
    return out


def _data_file(data: Path) -> Path:
    from homiebot.training.build import DATA_FILE

    path = data / DATA_FILE if data.is_dir() else data
    if not path.is_file():
        raise TrainingError(f"{data}: no data set (expected {DATA_FILE} from homie data build, or a parquet file)")
    return path


def load_rows(data: Path | Sequence[Path], stage: Stage) -> Any:
    """The data set of ``homie data build`` as a ``datasets.Dataset`` with only the columns the stage trains on
    (text models: the images column is left out). Several data sets (e.g. DAgger's corrections from noisy and
    noiseless play) are concatenated in the order given; they must be of one form (episodes or single rounds)."""
    from datasets import concatenate_datasets

    paths = [data] if isinstance(data, (str, Path)) else list(data)
    if not paths:
        raise TrainingError("no data set given")
    parts = [_load_one(Path(p), stage) for p in paths]
    forms = {tuple(part.column_names) for part in parts}
    if len(forms) > 1:
        raise TrainingError(
            f"{', '.join(str(p) for p in paths)}: the data sets are of different forms ({' / '.join(sorted(map(str, forms)))}); "
            "give episode sets (homie data build sft --episodes, homie data corrections) or round sets, not both"
        )
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)


def _load_one(data: Path, stage: Stage) -> Any:
    from datasets import load_dataset

    path = _data_file(data)
    dataset = load_dataset("parquet", data_files=str(path), split="train")
    if stage == "sft" and is_episode_data(dataset.column_names):
        return dataset.select_columns(["messages", "answer_loss"])  # one episode per row (--episodes)
    wanted = ("prompt", "completion") if stage == "sft" else ("prompt", "chosen", "rejected")
    missing = [c for c in wanted if c not in dataset.column_names]
    if missing:
        raise TrainingError(
            f"{path}: not a {stage} data set (no column {', '.join(missing)}); build it with homie data build {stage}"
        )
    return dataset.select_columns(list(wanted))


def _load_model(model: str | Path, preset: Preset) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        raise TrainingError(
            f"{model}: not a model folder (no config.json); for a bundled model write one first: "
            "homie train base --model smollm2 --out DIR"
        )
    if preset.threads is not None:
        torch.set_num_threads(preset.threads)
    dtype = torch.bfloat16 if preset.bf16 and torch.cuda.is_available() else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    if not tokenizer.chat_template:
        raise TrainingError(f"{model}: the tokenizer has no chat template (the data sets are chat conversations)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    network = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
    return network, tokenizer


def _common_args(preset: Preset, out: Path, max_steps: int | None) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    return {
        "output_dir": str(out / CHECKPOINTS),
        "per_device_train_batch_size": preset.batch_size,
        # Each of N processes accumulates 1/N of the preset's steps: the global batch stays the preset's.
        "gradient_accumulation_steps": max(1, preset.gradient_accumulation // max(1, preset.processes)),
        "num_train_epochs": preset.epochs,
        "max_steps": max_steps if max_steps is not None else preset.max_steps,
        "learning_rate": preset.learning_rate,
        "lr_scheduler_type": preset.scheduler,
        # transformers 5: an int counts steps, a float < 1 is a ratio of the total steps (rounded up).
        "warmup_steps": preset.warmup_steps if preset.warmup_steps is not None else preset.warmup_ratio,
        "weight_decay": preset.weight_decay,
        "max_grad_norm": preset.max_grad_norm,
        # Both must be set explicitly off on a CPU: the trl configs default them on (module docstring).
        "bf16": preset.bf16 and cuda,
        "activation_checkpointing": preset.gradient_checkpointing
        and cuda,  # transformers 5 name of gradient_checkpointing
        "optim": preset.optim if cuda or not preset.optim.startswith("paged") else "adamw_torch",
        "use_cpu": not cuda,
        "save_strategy": "steps",
        "save_steps": preset.save_steps,
        "save_total_limit": 1,
        "logging_steps": preset.logging_steps,
        "report_to": "none",
        "seed": preset.seed,
        "max_length": preset.max_length,
        "dataloader_num_workers": 0,
        # Several processes on a CPU: gloo; LoRA uses every adapter parameter, so DDP need not search for unused ones.
        **({"ddp_backend": "gloo", "ddp_find_unused_parameters": False} if preset.processes > 1 and not cuda else {}),
    }


def _peft_config(preset: Preset) -> Any:
    if not preset.lora:
        return None
    from peft import LoraConfig

    targets = preset.target_modules if isinstance(preset.target_modules, str) else list(preset.target_modules)
    return LoraConfig(
        r=preset.lora_r,
        lora_alpha=preset.lora_alpha,
        lora_dropout=preset.lora_dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )


def train(
    stage: Stage,
    data: str | Path | Sequence[str | Path],
    model: str | Path,
    out: str | Path,
    preset: Preset,
    *,
    max_steps: int | None = None,
    resume: bool = False,
    ref_model: str | Path | None = None,
    progress: bool = True,
    val_data: str | Path | None = None,
    stop: StopRule | None = None,
    init_adapter: str | Path | None = None,
) -> TrainResult:
    """Run one stage (``sft`` or ``dpo``) and save the adapter (or the full model without LoRA) in ``out``.

    ``ref_model``: DPO only, a model folder to score the reference with (default: the trained model itself with
    the adapter disabled, EMMOE's choice; a separate reference needs ``preset.lora`` off or is used as given).
    ``val_data``: SFT only, a held-out SFT data set (either form) scored during training
    (:mod:`homiebot.training.progress`). ``stop``: end this piece early with a checkpoint (``--resume`` continues).
    With ``preset.processes`` > 1 the SFT runs in that many processes (DDP over gloo); this one waits for them.
    ``init_adapter``: SFT only, a LoRA adapter of ``model`` to continue training (its own rank and layers; the
    preset's LoRA settings are not used): DAgger's corrections train the shipped adapter further, so the result
    is again one adapter of that size (docs/training.md).
    """
    try:
        import trl
    except ImportError:
        raise TrainingError("training needs trl, peft and datasets: pip install -e '.[train]'") from None
    if stage not in ("sft", "dpo"):
        raise TrainingError(f"unknown stage {stage!r}; use sft or dpo")
    if ref_model is not None and stage != "dpo":
        raise TrainingError("a reference model is for DPO only")
    if val_data is not None and stage != "sft":
        raise TrainingError("a validation set (--val) is for SFT only")
    if init_adapter is not None and stage == "dpo" and ref_model is not None:
        # With a continued adapter the reference is that adapter as loaded (trl keeps a frozen copy of it);
        # a second reference model would be a different objective.
        raise TrainingError("--init-adapter is its own DPO reference (a frozen copy); leave out --ref-model")
    if init_adapter is not None and not preset.lora:
        raise TrainingError("--init-adapter continues a LoRA adapter; it cannot be combined with --full")
    if init_adapter is not None:
        _check_adapter(Path(init_adapter))
    if preset.processes < 1:
        raise TrainingError(f"--processes must be at least 1, got {preset.processes}")
    if preset.sft_weight < 0:
        raise TrainingError(f"--sft-weight must be 0 or more, got {preset.sft_weight}")
    if preset.processes > 1 and stage != "sft":
        raise TrainingError("several processes (--processes) train SFT only")
    if max_steps is not None and max_steps < 1:  # transformers reads -1 as "no limit": a whole epoch
        raise TrainingError(f"max_steps must be at least 1 (or None for the preset's epochs), got {max_steps}")
    if stop is not None and stop.stop_after_steps is not None and stop.stop_after_steps < 1:
        raise TrainingError(f"--stop-after-steps must be at least 1, got {stop.stop_after_steps}")
    if stop is not None and stop.hours is not None and stop.hours <= 0:
        raise TrainingError(f"--hours must be more than 0, got {stop.hours}")
    if stop is not None and stop.max_memory_gb is not None and stop.max_memory_gb <= 0:
        raise TrainingError(f"--max-memory must be more than 0 GB, got {stop.max_memory_gb}")
    target = _check_out(Path(out), resume)
    sources = (str(data),) if isinstance(data, (str, Path)) else tuple(str(d) for d in data)
    dataset = load_rows([Path(d) for d in sources], stage)
    if len(dataset) == 0:
        raise TrainingError(f"{', '.join(sources)}: the data set is empty")
    if val_data is not None:
        load_rows(Path(val_data), "sft")  # refused here, before any process starts
    _check_model_folder(model)
    job = _Job(stage, sources, str(model), str(target), preset, max_steps, resume, ref_model, progress,
               None if val_data is None else str(val_data), stop or StopRule(),
               None if init_adapter is None else str(Path(init_adapter).expanduser().absolute()))
    first_step = _checkpoint_step(target) if resume else 0
    cost = _PieceCost.start()
    if preset.processes > 1 and not _distributed():
        _launch(job)
        result = _result_from_record(target)
    else:
        result = _run(job, trl.__version__)
    if not _distributed() and is_main_process_env():  # under an outside launcher this process sees only itself
        append_metrics(target / METRICS_FILE, cost.row(first_step, result.steps, preset.processes))
    return result


@dataclass(frozen=True)
class _PieceCost:
    """What one ``homie train`` invocation (a piece) cost, whole: every process's CPU (this one's and the training
    processes', reaped by the launcher) and the wall time, model loading, tokenizing and validation included.

    The steps' own timers (``step_cpu_s``) leave those out; the from-nothing cost of a run is the sum of its pieces
    (``python -m benchmarks.run_figures --metrics ...``)."""

    wall: float
    cpu: float

    @staticmethod
    def start() -> _PieceCost:
        return _PieceCost(time.perf_counter(), _cpu_seconds())

    def row(self, first_step: int, last_step: int, processes: int) -> dict[str, Any]:
        return {
            "kind": "piece",
            "step": last_step,  # kept by truncate_metrics when a later piece resumes from this checkpoint
            "first_step": first_step,
            "processes": processes,
            "cpu_s": round(_cpu_seconds() - self.cpu, 3),
            "wall_s": round(time.perf_counter() - self.wall, 3),
        }


def _cpu_seconds() -> float:
    """User and system CPU of this process and of its children that have ended (the training processes)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class _Job:
    """One training run's arguments, as handed to each process."""

    stage: Stage
    data: tuple[str, ...]  # one data set or several, concatenated in this order
    model: str
    out: str
    preset: Preset
    max_steps: int | None
    resume: bool
    ref_model: str | Path | None
    progress: bool
    val_data: str | None
    stop: StopRule
    init_adapter: str | None = None


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _launch(job: _Job) -> None:
    """Run ``job`` in ``preset.processes`` processes (torch.multiprocessing, spawn) joined by gloo on this machine.

    transformers' Trainer does DDP when it finds the torch launcher's environment (RANK, WORLD_SIZE, ...); each
    process sets it for itself, so ``homie train`` needs no ``torchrun`` in front of it."""
    import os
    import signal
    import socket
    import threading

    import torch.multiprocessing as mp

    with socket.socket() as probe:  # a free port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = mp.start_processes(
        _process_main,
        args=(job.preset.processes, port, job),
        nprocs=job.preset.processes,
        start_method="spawn",
        join=False,
    )

    def forward(number: int, frame: Any) -> None:
        # A piece is stopped by signalling the processes, which checkpoint and stop together (progress.StopRule).
        for process in context.processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, number)

    previous = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers can only be set there
        previous = {number: signal.signal(number, forward) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not context.join():
            pass
    except mp.ProcessRaisedException as err:
        last = str(err).strip().splitlines()[-1] if str(err).strip() else "a training process failed"
        raise TrainingError(f"a training process failed: {last}") from None
    except mp.ProcessExitedException as err:
        raise TrainingError(f"a training process ended with exit code {err.exit_code}") from None
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _process_main(rank: int, world: int, port: int, job: _Job) -> None:
    import os

    import trl

    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    _run(job, trl.__version__)


def _result_from_record(target: Path) -> TrainResult:
    record = json.loads((target / TRAINING_FILE).read_text(encoding="utf-8"))
    return TrainResult(
        out=target,
        stage=record["stage"],
        steps=record["steps"],
        samples=record["samples"],
        losses=record["losses"],
        seconds=record["seconds"],
        seconds_per_step=record["seconds_per_step"],
        trainable_parameters=record["trainable_parameters"],
        log_history=record["log_history"],
        step_seconds=record["step_seconds"],
        step_cpu_seconds=record["step_cpu_seconds"],
        step_learning_rates=record["step_learning_rates"],
        finished=record.get("finished", True),
    )


def _check_adapter(adapter: Path) -> None:
    folder = adapter.expanduser()
    if not (folder / "adapter_config.json").is_file():
        raise TrainingError(f"--init-adapter {adapter}: not a LoRA adapter folder (no adapter_config.json)")


def _check_model_folder(model: str | Path) -> None:
    if not (Path(model).expanduser() / "config.json").is_file():
        raise TrainingError(
            f"{model}: not a model folder (no config.json); for a bundled model write one first: "
            "homie train base --model smollm2 --out DIR"
        )


def tokenized_sft(rows: Any, tokenizer: Any, max_length: int) -> tuple[Any, list[TokenizedChat], int]:
    """The SFT rows (either data form) as trl's processed data set (``input_ids``, ``completion_mask``: trl builds
    the labels from it), the tokenised chats kept, and how many were dropped for exceeding ``max_length`` (a cut
    chat would train on a cut answer or none)."""
    from datasets import Dataset

    chats = tokenize_rows(rows, tokenizer)
    kept = [c for c in chats if len(c.input_ids) <= max_length and c.answers]
    dropped = len(chats) - len(kept)
    table = {"input_ids": [c.input_ids for c in kept], "completion_mask": [c.completion_mask() for c in kept]}
    return Dataset.from_dict(table), kept, dropped


def _answer_loss_trainer(trl: Any, preset: Preset) -> Any:
    """trl's SFTTrainer with the loss computed from the answers' logits only (and bf16 autocast on a CPU).

    Why its own loss: trl 1.16's fused LM head projects only the learned positions through the LM head on Triton
    devices, but on a CPU it projects every position in chunks (``add_fused_lm_head``: "Elsewhere ... every
    position is scored"); with a 49k vocabulary that is most of a step's CPU when a tenth of the tokens are answer
    tokens. transformers 5 takes a boolean ``logits_to_keep`` mask (``slice_logits_to_keep``), so the model's own
    forward (through DDP and peft, which a direct call of the LM head would bypass) computes the answers' logits
    alone; the loss is the same token-mean cross-entropy, normalised as trl normalises it."""
    import torch
    from torch.nn import functional

    class AnswerLossSFTTrainer(trl.SFTTrainer):
        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
        ) -> Any:
            mode = "train" if self.model.training else "eval"
            labels = inputs["labels"]
            targets = labels[:, 1:]
            learned = targets != -100
            keep = torch.zeros_like(labels, dtype=torch.bool)
            keep[:, :-1] = learned
            forward = {k: v for k, v in inputs.items() if k not in ("labels", "completion_mask")}
            cpu = labels.device.type == "cpu"
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu and preset.cpu_bf16):
                outputs = model(**forward, use_cache=False, logits_to_keep=keep)
            logits = outputs.logits.float()
            answer_targets = targets[learned]
            total = functional.cross_entropy(logits, answer_targets, reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else learned.sum()
            loss = total / torch.as_tensor(count).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes  # DDP averages the gradients over processes (as trl)
            with torch.no_grad():
                right = (logits.argmax(-1) == answer_targets).sum()
                valid = self.accelerator.gather_for_metrics(learned.sum()).sum()
                right = self.accelerator.gather_for_metrics(right).sum()
                self._metrics[mode]["mean_token_accuracy"].append((right / valid).item() if valid > 0 else 0.0)
            return (loss, outputs) if return_outputs else loss

    return AnswerLossSFTTrainer


def _cpu_bf16_dpo_trainer(trl: Any, preset: Preset) -> Any:
    """trl's DPOTrainer with its loss (policy and reference forwards) under bf16 autocast on a CPU, as the cpu SFT
    preset's loss: transformers' ``bf16`` argument is for accelerators (``_common_args``)."""
    import torch

    class CpuBf16DPOTrainer(trl.DPOTrainer):
        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
        ) -> Any:
            cpu = next(iter(inputs.values())).device.type == "cpu"
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cpu and preset.cpu_bf16):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    return CpuBf16DPOTrainer


def _validation(val_chats: list[TokenizedChat], tokenizer: Any, preset: Preset) -> Any:
    """``evaluate(model)`` for the validation callback: this process's share of the held-out chats, scored by
    :func:`~homiebot.training.offline_eval.next_subtask_accuracy`, summed over the processes; the RNG states are
    put back afterwards so that a validation does not change the training's random draws."""
    import torch
    import torch.distributed as dist

    from homiebot.training.offline_eval import SubtaskAccuracy, next_subtask_accuracy, scored

    def evaluate(model: Any) -> Any:
        rank, world = (dist.get_rank(), dist.get_world_size()) if _distributed() else (0, 1)
        state = torch.random.get_rng_state()
        network = model.module if hasattr(model, "module") else model
        # fp32 even when training in bf16: under autocast every one-token decoding step casts all the frozen weights
        # again (autocast caches the casts of trainable leaves only): 237 against 73 ms of CPU per decoded token
        # (SmolLM2-135M with its LoRA adapter, one thread, measured here).
        mine = next_subtask_accuracy(network, tokenizer, val_chats[rank::world])
        torch.random.set_rng_state(state)
        if world > 1:
            counts = torch.tensor(
                [mine.answers, mine.subtask_right, mine.action_right, mine.unparsed, mine.nll_sum, mine.nll_tokens],
                dtype=torch.float64,
            )
            dist.all_reduce(counts)
            seconds = torch.tensor([mine.seconds], dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
            a, s, c, u, n, t = counts.tolist()
            mine = SubtaskAccuracy(int(a), int(s), int(c), int(u), n, int(t), float(seconds.item()))
        return scored(mine)

    return evaluate


def _val_chats(val_data: str, tokenizer: Any, preset: Preset) -> list[TokenizedChat]:
    """The validation set's chats, a fixed sample of ``preset.val_limit`` answers' worth (whole chats, shuffled
    with seed 0 so that every evaluation and every piece of a run scores the same ones;
    :func:`~homiebot.training.offline_eval.validation_sample`)."""
    from homiebot.training.offline_eval import validation_sample

    chats = tokenize_rows(load_rows(Path(val_data), "sft"), tokenizer)
    return [chats[i] for i in validation_sample(chats, preset.val_limit)]


def _run(job: _Job, trl_version: str) -> TrainResult:
    import trl

    stage, preset, target = job.stage, job.preset, Path(job.out)
    log.info(apply_allocator_settings())  # before the model's buffers exist (homiebot/training/allocator.py)
    dataset = load_rows([Path(d) for d in job.data], stage)
    network, tokenizer = _load_model(job.model, preset)
    peft_config = _peft_config(preset)
    if job.init_adapter is not None:
        from peft import PeftModel

        network = PeftModel.from_pretrained(network, job.init_adapter, is_trainable=True)
        peft_config = None  # the model is already a trainable PeftModel
    args = _common_args(preset, target, job.max_steps)
    args["disable_tqdm"] = not job.progress
    main = is_main_process_env()
    metrics_path = target / METRICS_FILE
    if job.resume and main:
        truncate_metrics(metrics_path, _checkpoint_step(target))
    started = time.perf_counter()
    dropped = 0
    if stage == "sft":
        processed, _, dropped = tokenized_sft(dataset, tokenizer, preset.max_length)
        if len(processed) == 0:
            raise TrainingError(
                f"no sample of {', '.join(job.data)} fits in max_length={preset.max_length} tokens with an answer; "
                "raise --max-length or drop the system turn"
            )
        sft_config = trl.SFTConfig(**args, completion_only_loss=True, packing=False)
        trainer_class = _answer_loss_trainer(trl, preset) if preset.answer_only_logits else trl.SFTTrainer
        trainer: Any = trainer_class(
            model=network,
            args=sft_config,
            train_dataset=processed,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        kept = len(trainer.train_dataset)
        dropped += len(processed) - kept
    else:
        reference = None
        if job.ref_model is not None:
            reference, _ = _load_model(job.ref_model, preset)
        loss_types, weights = (["sigmoid", "sft"], [1.0, preset.sft_weight]) if preset.sft_weight > 0 else (
            ["sigmoid"], [1.0])
        dpo_config = trl.DPOConfig(**args, beta=preset.beta, loss_type=loss_types, loss_weights=weights)
        dpo_class = _cpu_bf16_dpo_trainer(trl, preset) if preset.cpu_bf16 else trl.DPOTrainer
        trainer = dpo_class(
            model=network,
            ref_model=reference,
            args=dpo_config,
            train_dataset=dataset,
            processing_class=tokenizer,
            # A continued adapter (init_adapter): trl copies it as the frozen reference ("ref" adapter), so DPO
            # starts from the SFT policy and is held to it, as the paper's merge-then-new-adapter does, and the
            # result is again one adapter of the shipped size.
            peft_config=peft_config,
        )
        kept = len(trainer.train_dataset)
        dropped = len(dataset) - kept
    if kept == 0:
        raise TrainingError(
            f"no sample of {', '.join(job.data)} fits in max_length={preset.max_length} tokens with its answer "
            "(trl drops samples whose answer is cut off); raise --max-length or drop the system turn"
        )
    if dropped and main:
        log.warning(
            "%d of %d samples are longer than max_length=%d and were dropped", dropped, len(dataset), preset.max_length
        )
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    timer = _step_timer()
    trainer.add_callback(timer)
    if main:
        trainer.add_callback(metrics_callback(metrics_path, lambda: (timer.wall, timer.cpu)))
    if job.val_data is not None:
        val_chats = _val_chats(job.val_data, tokenizer, preset)
        evaluate = _validation(val_chats, tokenizer, preset)
        trainer.add_callback(validation_callback(evaluate, metrics_path, preset.eval_steps, at_start=not job.resume))
    stopper = stop_callback(job.stop)
    trainer.add_callback(stopper)
    output = trainer.train(resume_from_checkpoint=True if job.resume else None)
    seconds = time.perf_counter() - started
    if not main:
        return TrainResult(out=target, stage=stage, steps=int(output.global_step), samples=len(dataset))
    from peft import PeftModel

    if stage == "dpo" and isinstance(trainer.model, PeftModel) and "ref" in trainer.model.peft_config:
        # trl's frozen copy of a continued adapter (the reference) is not part of the result: without this,
        # save_model writes it beside the trained adapter as OUT/ref/, a second 10 MB adapter nobody loads.
        trainer.model.delete_adapter("ref")
    trainer.save_model(str(target))
    tokenizer.save_pretrained(str(target))
    history = [dict(h) for h in trainer.state.log_history]
    losses = [float(h["loss"]) for h in history if "loss" in h]
    steps = int(output.global_step)
    finished = not stopper.stopped_early
    result = TrainResult(
        out=target,
        stage=stage,
        steps=steps,
        samples=len(dataset),
        losses=losses,
        seconds=seconds,
        seconds_per_step=seconds / max(steps, 1),
        trainable_parameters=trainable,
        log_history=history,
        step_seconds=timer.wall,
        step_cpu_seconds=timer.cpu,
        step_learning_rates=timer.lr,
        finished=finished,
    )
    record = {
        "stage": stage,
        "preset": asdict(preset),
        "data": job.data[0] if len(job.data) == 1 else list(job.data),
        "val_data": job.val_data,
        "model": job.model,
        "ref_model": None if job.ref_model is None else str(job.ref_model),
        "init_adapter": job.init_adapter,
        "steps": steps,
        "max_steps": int(trainer.state.max_steps),
        "finished": finished,
        "samples": len(dataset),
        "seconds": seconds,
        "seconds_per_step": result.seconds_per_step,
        "trainable_parameters": trainable,
        "losses": losses,
        "step_seconds": timer.wall,
        "step_cpu_seconds": timer.cpu,
        "step_learning_rates": timer.lr,
        "log_history": history,
        "trl": trl_version,
    }
    (target / TRAINING_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    plot_curves(read_metrics(metrics_path), target, stage)
    publish_tree(target)
    return result


def is_main_process_env() -> bool:
    """Rank 0 of a distributed run, read from the launcher's environment (before the process group exists)."""
    import os

    return os.environ.get("RANK", "0") == "0"


def _checkpoint_step(target: Path) -> int:
    """The step of the newest checkpoint under ``target`` (what ``--resume`` continues from)."""
    steps = [int(p.name.split("-")[-1]) for p in (target / CHECKPOINTS).glob("checkpoint-*") if p.name[11:].isdigit()]
    if not steps:
        raise TrainingError(f"--resume: {target / CHECKPOINTS} holds no checkpoint-N folder")
    return max(steps)


def merge(model: str | Path, adapter: str | Path, out: str | Path) -> Path:
    """Merge a LoRA adapter into its base and save the full model (the paper's SFT -> DPO hand-over)."""
    from peft import PeftModel

    target = Path(out).expanduser().absolute()
    if target.exists() and any(target.iterdir()):
        raise TrainingError(f"output {target} is not empty; choose another --out")
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise TrainingError(f"{adapter}: not a peft adapter (no adapter_config.json)")
    network, tokenizer = _load_model(model, Preset("merge"))
    merged = PeftModel.from_pretrained(network, str(adapter)).merge_and_unload()
    merged.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    publish_tree(target)
    return target


def materialize_base(name: str, out: str | Path) -> Path:
    """Write a bundled GGUF model (``smollm2``) as a trainable float32 transformers folder."""
    from homiebot.planner.gguf_export import float_folder
    from homiebot.planner.models import ModelNotInstalledError, bundled_model

    bundled = bundled_model(name)
    if bundled is None:
        raise TrainingError(f"{name!r} is not a bundled model (homie run --help lists them)")
    try:
        path = bundled.path()
    except ModelNotInstalledError as err:
        raise TrainingError(str(err)) from None
    target = Path(out).expanduser().absolute()
    if target.exists() and any(target.iterdir()):
        raise TrainingError(f"output {target} is not empty; choose another --out")
    float_folder(path, target)
    publish_tree(target)
    return target


def check_data(data: str | Path) -> None:
    """Fail early (before loading a model) when ``data`` is no data set."""
    try:
        _data_file(Path(data))
    except TrainingError as err:
        raise TrainingDataError(str(err)) from None

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

Runs are resumable: checkpoints go to ``OUT/checkpoints`` every ``save_steps``; ``resume=True`` continues
from the newest. The adapter (``adapter_config.json`` + weights + tokenizer) is saved in ``OUT``, with
``OUT/training.json`` (preset, data, steps, losses, wall time).

A bundled GGUF model cannot be trained (its weights are quantised): :func:`materialize_base` writes it out as
a trainable float folder first (``homie train base --model smollm2 --out DIR``; the GGUF loader's
``quantization_config`` has to be dropped before ``save_pretrained``, docs/training.md).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from homiebot.training.episodes import TrainingDataError

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
    optim: str = "adamw_torch"
    threads: int | None = None
    save_steps: int = 50
    logging_steps: int = 1
    seed: int = 0


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
    return replace(preset, **overrides)


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

    def lines(self) -> list[str]:
        first = f"{self.losses[0]:.4f}" if self.losses else "n/a"
        last = f"{self.losses[-1]:.4f}" if self.losses else "n/a"
        return [
            f"{self.stage}: {self.steps} steps on {self.samples} samples in {self.seconds:.1f} s "
            f"({self.seconds_per_step:.2f} s/step), {self.trainable_parameters:,} trainable parameters",
            f"  loss {first} -> {last}; adapter in {self.out}",
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


def load_rows(data: Path, stage: Stage) -> Any:
    """The data set of ``homie data build`` as a ``datasets.Dataset`` with only the columns the stage trains on
    (text models: the images column is left out)."""
    from datasets import load_dataset

    path = _data_file(data)
    dataset = load_dataset("parquet", data_files=str(path), split="train")
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
        "gradient_accumulation_steps": preset.gradient_accumulation,
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
    data: str | Path,
    model: str | Path,
    out: str | Path,
    preset: Preset,
    *,
    max_steps: int | None = None,
    resume: bool = False,
    ref_model: str | Path | None = None,
    progress: bool = True,
) -> TrainResult:
    """Run one stage (``sft`` or ``dpo``) and save the adapter (or the full model without LoRA) in ``out``.

    ``ref_model``: DPO only, a model folder to score the reference with (default: the trained model itself with
    the adapter disabled, EMMOE's choice; a separate reference needs ``preset.lora`` off or is used as given).
    """
    try:
        import trl
    except ImportError:
        raise TrainingError("training needs trl, peft and datasets: pip install -e '.[train]'") from None
    if stage not in ("sft", "dpo"):
        raise TrainingError(f"unknown stage {stage!r}; use sft or dpo")
    if ref_model is not None and stage != "dpo":
        raise TrainingError("a reference model is for DPO only")
    if max_steps is not None and max_steps < 1:  # transformers reads -1 as "no limit": a whole epoch
        raise TrainingError(f"max_steps must be at least 1 (or None for the preset's epochs), got {max_steps}")
    target = _check_out(Path(out), resume)
    dataset = load_rows(Path(data), stage)
    if len(dataset) == 0:
        raise TrainingError(f"{data}: the data set is empty")
    network, tokenizer = _load_model(model, preset)
    args = _common_args(preset, target, max_steps)
    args["disable_tqdm"] = not progress
    started = time.perf_counter()
    if stage == "sft":
        sft_config = trl.SFTConfig(**args, completion_only_loss=True, packing=False)
        trainer: Any = trl.SFTTrainer(
            model=network,
            args=sft_config,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=_peft_config(preset),
        )
    else:
        reference = None
        if ref_model is not None:
            reference, _ = _load_model(ref_model, preset)
        dpo_config = trl.DPOConfig(**args, beta=preset.beta, loss_type=["sigmoid"])
        trainer = trl.DPOTrainer(
            model=network,
            ref_model=reference,
            args=dpo_config,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=_peft_config(preset),
        )
    kept = len(trainer.train_dataset)
    if kept == 0:
        raise TrainingError(
            f"no sample of {data} fits in max_length={preset.max_length} tokens with its answer "
            "(trl drops samples whose answer is cut off); raise --max-length or drop the system turn"
        )
    if kept < len(dataset):
        log.warning(
            "%d of %d samples are longer than max_length=%d and were dropped",
            len(dataset) - kept,
            len(dataset),
            preset.max_length,
        )
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    timer = _step_timer()
    trainer.add_callback(timer)
    output = trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.perf_counter() - started
    trainer.save_model(str(target))
    tokenizer.save_pretrained(str(target))
    history = [dict(h) for h in trainer.state.log_history]
    losses = [float(h["loss"]) for h in history if "loss" in h]
    steps = int(output.global_step)
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
    )
    record = {
        "stage": stage,
        "preset": asdict(preset),
        "data": str(data),
        "model": str(model),
        "ref_model": None if ref_model is None else str(ref_model),
        "steps": steps,
        "samples": len(dataset),
        "seconds": seconds,
        "seconds_per_step": result.seconds_per_step,
        "trainable_parameters": trainable,
        "losses": losses,
        "step_seconds": timer.wall,
        "step_cpu_seconds": timer.cpu,
        "step_learning_rates": timer.lr,
        "log_history": history,
        "trl": trl.__version__,
    }
    (target / TRAINING_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    publish_tree(target)
    return result


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
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

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
    folder, filename = str(path.parent), path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename, local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=filename, local_files_only=True, dtype=torch.float32
    )
    config = AutoConfig.from_pretrained(folder, gguf_file=filename, local_files_only=True)
    # A GGUF-loaded model refuses save_pretrained ("quantized with gguf, not serializable"): rebuild it from its
    # config without the quantisation entry and copy the dequantised weights over.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    publish_tree(target)
    return target


def check_data(data: str | Path) -> None:
    """Fail early (before loading a model) when ``data`` is no data set."""
    try:
        _data_file(Path(data))
    except TrainingError as err:
        raise TrainingDataError(str(err)) from None

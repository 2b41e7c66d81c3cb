"""What a training run reports and how it stops in pieces: ``metrics.jsonl``, the curves, validation, stopping.

* ``OUT/metrics.jsonl``: one JSON line per logged optimizer step (``"kind": "train"``: loss, learning rate,
  token accuracy on the answers, CPU and wall seconds of the step) and per validation (``"kind": "val"``: offline
  next-subtask accuracy, action accuracy, answer NLL, :func:`homiebot.training.offline_eval.next_subtask_accuracy`)
  and per finished piece (``"kind": "piece"``: its first and last step, the CPU seconds of every process and the
  wall seconds of the whole invocation, loading and validation included; written by ``trainer.train``).
  A resumed run first drops the lines after its checkpoint's step (they belong to the piece that was cut off),
  so the file is the run's history as if it had never stopped.
* ``OUT/loss.png`` and ``OUT/accuracy.png``: the curves drawn from that file (matplotlib) at the end of each
  piece.
* Stopping: after ``stop_after_steps`` steps of this piece, after ``hours`` of wall time, when a process's resident
  memory passes ``max_memory_gb``, or on SIGINT/SIGTERM,
  the run saves a checkpoint at the end of the current step and stops; ``--resume`` continues from it. With
  several processes the decision is taken together (all-reduce), so that every process saves the same step.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
LOSS_PLOT = "loss.png"
ACCURACY_PLOT = "accuracy.png"


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the lines up to ``step`` (a resumed run continues from that checkpoint)."""
    kept = [m for m in read_metrics(path) if int(m.get("step", 0)) <= step]
    path.write_text("".join(json.dumps(m) + "\n" for m in kept), encoding="utf-8")


def append_metrics(path: Path, entry: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def plot_curves(metrics: Sequence[dict[str, Any]], out: Path, stage: str = "sft") -> list[Path]:
    """``loss.png`` (training loss per step, validation answer NLL) and ``accuracy.png`` (validation next-subtask
    and action accuracy) from the metrics' lines; a curve with no points is not drawn. ``stage`` names the loss:
    SFT's is nats per answer token, DPO's the preference loss per pair (ln 2 where policy and reference agree)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    train = [m for m in metrics if m.get("kind") == "train" and m.get("loss") is not None]
    val = [m for m in metrics if m.get("kind") == "val"]
    written: list[Path] = []
    if train or val:
        figure, axes = plt.subplots(figsize=(7, 4))
        if train:
            label = "training loss (answer tokens)" if stage == "sft" else "training loss (DPO, per pair)"
            axes.plot([m["step"] for m in train], [m["loss"] for m in train], label=label)
        nll = [m for m in val if m.get("answer_nll") is not None and math.isfinite(m["answer_nll"])]
        if nll:
            axes.plot([m["step"] for m in nll], [m["answer_nll"] for m in nll], "o-", label="validation answer NLL")
        axes.set_xlabel("optimizer step")
        axes.set_ylabel("nats per answer token" if stage == "sft" else "loss (nats)")
        axes.grid(alpha=0.3)
        axes.legend()
        figure.tight_layout()
        figure.savefig(out / LOSS_PLOT, dpi=100)
        plt.close(figure)
        written.append(out / LOSS_PLOT)
    if val:
        figure, axes = plt.subplots(figsize=(7, 4))
        steps = [m["step"] for m in val]
        axes.plot(steps, [100 * m["subtask_accuracy"] for m in val], "o-", label="next subtask (action and target)")
        axes.plot(steps, [100 * m["action_accuracy"] for m in val], "s--", label="action only")
        axes.set_xlabel("optimizer step")
        axes.set_ylabel("validation accuracy (%)")
        axes.set_ylim(0, 100)
        axes.grid(alpha=0.3)
        axes.legend()
        figure.tight_layout()
        figure.savefig(out / ACCURACY_PLOT, dpi=100)
        plt.close(figure)
        written.append(out / ACCURACY_PLOT)
    return written


def agree(flag: bool) -> bool:
    """True when ``flag`` is true in any process of the run (all-reduce MAX; the flag itself in one process)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    value = torch.tensor([1 if flag else 0])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def is_main_process() -> bool:
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


@dataclass(frozen=True)
class StopRule:
    """When this piece of a run stops early (module docstring)."""

    stop_after_steps: int | None = None
    hours: float | None = None
    # Resident memory of one training process (GB) past which the piece checkpoints and stops: glibc keeps the heap
    # the longest samples grew, so a long run's processes only grow, and a fresh piece (--resume) starts small
    # again (docs/results/trained-planner-2026-11-28.md: two processes at 11 and 12 GB thrashed a 24 GB machine).
    max_memory_gb: float | None = None


def resident_gb() -> float:
    """This process's resident memory (GB)."""
    import psutil

    return float(psutil.Process().memory_info().rss) / 1e9


def stop_callback(rule: StopRule) -> Any:
    """A trainer callback that checkpoints and stops by :class:`StopRule` or on SIGINT/SIGTERM."""
    from transformers import TrainerCallback

    class StopControl(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.monotonic()
            self.first_step: int | None = None
            self.signalled: str | None = None
            self.stopped_early = False
            self._previous: dict[int, Any] = {}

        def _on_signal(self, number: int, frame: Any) -> None:
            self.signalled = signal.Signals(number).name

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.monotonic()
            self.first_step = state.global_step
            for number in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._previous[number] = signal.signal(number, self._on_signal)
                except ValueError:  # not the main thread: no handler, the other rules still apply
                    pass

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            done = state.global_step - (self.first_step or 0)
            reasons = []
            if rule.stop_after_steps is not None and done >= rule.stop_after_steps:
                reasons.append(f"{done} steps")
            if rule.hours is not None and time.monotonic() - self.started >= rule.hours * 3600:
                reasons.append(f"{rule.hours} h")
            if self.signalled:
                reasons.append(self.signalled)
            if rule.max_memory_gb is not None and (resident := resident_gb()) >= rule.max_memory_gb:
                reasons.append(f"{resident:.1f} GB resident, over --max-memory {rule.max_memory_gb:g}")
            if agree(bool(reasons)) and state.global_step < state.max_steps:
                self.stopped_early = True
                control.should_save = True
                control.should_training_stop = True
                log.warning(
                    "stopping after step %d (%s): checkpoint saved, continue with --resume",
                    state.global_step,
                    ", ".join(reasons) or "another process",
                )

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            for number, handler in self._previous.items():
                signal.signal(number, handler)

    return StopControl()


def metrics_callback(path: Path, step_times: Callable[[], tuple[list[float], list[float]]]) -> Any:
    """A trainer callback appending every logged training step to ``metrics.jsonl`` (main process only)."""
    from transformers import TrainerCallback

    class MetricsWriter(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if not logs or "loss" not in logs or not is_main_process():
                return
            wall, cpu = step_times()
            entry = {
                "kind": "train",
                "step": state.global_step,
                "epoch": round(float(state.epoch or 0.0), 4),
                "loss": float(logs["loss"]),
                "learning_rate": float(logs.get("learning_rate", math.nan)),
                "token_accuracy": logs.get("mean_token_accuracy"),
                "step_wall_s": round(wall[-1], 3) if wall else None,
                "step_cpu_s": round(cpu[-1], 3) if cpu else None,
                "time": time.time(),
            }
            append_metrics(path, entry)

    return MetricsWriter()


def validation_callback(
    evaluate: Callable[[Any], Any], path: Path, eval_steps: int | None, at_start: bool
) -> Any:
    """A trainer callback running ``evaluate(model)`` (every process, each on its share; the figures summed) every
    ``eval_steps`` optimizer steps, or at the end of each epoch when None, and at the end; the main process appends
    the result to ``metrics.jsonl``. ``at_start``: also before the first step of a fresh run (the base model)."""
    from transformers import TrainerCallback

    class Validation(TrainerCallback):
        def __init__(self) -> None:
            self.done_at: set[int] = set()

        def _run(self, state: Any, model: Any) -> None:
            if state.global_step in self.done_at:
                return
            self.done_at.add(state.global_step)
            result = evaluate(model)
            if is_main_process():
                entry = {"kind": "val", "step": state.global_step, "epoch": round(float(state.epoch or 0.0), 4)}
                entry.update(asdict(result))
                append_metrics(path, entry)
                log.info("validation at step %d: %s", state.global_step, "; ".join(result.lines()))

        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            if at_start and state.global_step == 0:
                self._run(state, model)

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            if eval_steps is not None and state.global_step % eval_steps == 0:
                self._run(state, model)

        def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            if eval_steps is None:
                self._run(state, model)

        def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            if state.global_step >= state.max_steps:
                self._run(state, model)

    return Validation()

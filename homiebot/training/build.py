"""``homie data build sft|dpo``: episode records -> EMMOE's SFT or DPO data as a Hugging Face data set.

Output folder (written into a hidden temp folder and renamed into place: a failed build leaves nothing)::

    OUT/data/train.parquet   the data set trl reads (datasets.load_dataset("parquet", data_files=...)):
                             SFT: id, variant, prompt (chat messages), completion (one assistant message), images
                             DPO: id, kind, variant, prompt, chosen, rejected (assistant messages), images
    OUT/sft.json | dpo.json  the paper's own layout (LLaVA conversations; prompt/chosen/rejected strings)
    OUT/images/<episode>/    the views of the rounds used (hard links to the records' PNGs, else copies)
    OUT/stats.json           counts per kind and variant, what was left out and why, the settings

Counts follow the paper's formula (spec: SFT = V x successful subtasks incl. End; DPO = V x (3 x (SFT per
variant - End samples) + re-plan pairs), V = 1 + rewrites), minus the pairs :mod:`~homiebot.training.emmoe`
drops for being empty (each counted in ``stats.json``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from homiebot.files import publish
from homiebot.training.emmoe import (
    PAIR_KINDS,
    Pair,
    Step,
    augment,
    paper_steps,
    recorded_step,
    runtime_steps,
    sift,
    step_messages,
)
from homiebot.training.episodes import TEXT_WORLD_FILE, EpisodeData, TrainingDataError, load_episodes
from homiebot.training.rewrite import Rewriter, TemplateRewriter, guarded

log = logging.getLogger(__name__)

DataKind = Literal["sft", "dpo"]
PromptFormat = Literal["runtime", "paper"]
DATA_FILE = "data/train.parquet"
STATS_FILE = "stats.json"


@dataclass(frozen=True)
class BuildOptions:
    prompt_format: PromptFormat = "runtime"
    rewrites: int = 3  # EMMOE: three rewrites, four versions of every trajectory
    split: str = "train"
    system_prompt: bool = True  # runtime format: the record's system information as a system turn
    text_observation: bool = False  # runtime format: the text planning mode's system information (text-only models)
    # runtime format: a round whose record holds its model input (rounds.jsonl's model_calls) is trained on exactly
    # that chat (the system turn follows system_prompt; text_observation applies to the other rounds only).
    recorded_input: bool = True
    images: bool = True  # link the views into OUT/images when the records have them
    replan_from_execution_errors: bool = False
    successful_only: bool = True
    # SFT answers without the Analysis line: PARTNR's "thoughtless" samples (PARTNR appendix A.10: the finetuned
    # planner predicts the next action only), to measure what the analysis is worth and what it costs per step.
    thoughtless: bool = False


@dataclass
class BuildStats:
    kind: str
    episodes: int
    variants: int
    samples: int
    per_kind: dict[str, int]
    per_variant: dict[str, int]
    end_samples: int
    failed_subtasks_dropped: int
    episodes_left_out: dict[str, int]
    pairs_dropped: dict[str, int] = field(default_factory=dict)
    rewrites_refused: int = 0
    #: Rounds whose prompt is the model input their record holds (runtime format).
    recorded_input_rounds: int = 0
    images: int = 0
    seconds: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The summary the command prints."""
        out = [f"{self.kind}: {self.samples} samples from {self.episodes} episodes x {self.variants} variants"]
        out += [f"  {k}: {v}" for k, v in self.per_kind.items()]
        left = {k: v for k, v in self.episodes_left_out.items() if v}
        if left:
            out.append("  episodes left out: " + ", ".join(f"{k} {v}" for k, v in left.items()))
        dropped = {k: v for k, v in self.pairs_dropped.items() if v}
        if dropped:
            out.append("  pairs dropped: " + ", ".join(f"{k} {v}" for k, v in dropped.items()))
        if self.rewrites_refused:
            out.append(f"  rewrites refused by the name guard (original kept): {self.rewrites_refused}")
        if self.recorded_input_rounds:
            out.append(f"  rounds prompted with the model input their record holds: {self.recorded_input_rounds}")
        return out


def _names(episode: EpisodeData) -> set[str]:
    names: set[str] = set()
    for r in episode.rounds:
        if r.subtask is not None:
            names |= {n for n in (r.subtask.target, r.subtask.place) if n}
        names |= set(r.inventory)
    return names


def rewrite_episode(episode: EpisodeData, rewriter: Rewriter, k: int) -> tuple[EpisodeData, int]:
    """Variant ``k`` of an episode (k = 0: itself): rewrite k of the task and of every analysis (spec: variant
    k uses rewrite k of both). Returns it and how many rewrites the guard refused."""
    if k == 0:
        return episode, 0
    names = _names(episode)
    task, ok = guarded(episode.instruction, rewriter.rewrite(episode.instruction, "task", k), names)
    refused = 0 if ok else 1
    analyses: list[str] = []
    for r in episode.rounds:
        if not r.analysis:
            analyses.append(r.analysis)
            continue
        text, ok = guarded(r.analysis, rewriter.rewrite(r.analysis, "analysis", k), names)
        refused += 0 if ok else 1
        analyses.append(text)
    return episode.with_text(task, analyses), refused


def episode_steps(episode: EpisodeData, variant: EpisodeData, k: int, options: BuildOptions) -> list[Step]:
    key = f"{episode.key}_v{k}"
    image_dir = f"images/{episode.key}" if options.images and episode.rounds and episode.rounds[0].images else None
    if options.prompt_format == "paper":
        return paper_steps(variant, key, image_dir)
    system = None
    if options.system_prompt and episode.system_prompt:
        system = episode.system_prompt
        if options.text_observation:
            from homiebot.planner.text_planning import text_system_prompt

            system = text_system_prompt(system)
    steps = runtime_steps(variant, key, system, original_task=episode.instruction)
    recorded = [r.model_input if options.recorded_input else None for r in variant.rounds]
    if options.text_observation and not all(recorded):
        steps = _with_text_world(steps, episode)
    steps = [
        step if model_input is None
        else recorded_step(step, model_input, options.system_prompt, episode.instruction, variant.instruction)
        for step, model_input in zip(steps, recorded, strict=True)
    ]
    if image_dir is None:
        return [_no_images(s) for s in steps]
    return [_relative_images(s, image_dir) for s in steps]


def _with_text_world(steps: list[Step], episode: EpisodeData) -> list[Step]:
    """Each step's user turn opened with the episode's world description, as the hf planner's text mode sends a
    round with ``include_history=False`` (a fresh chat per round), so the model trains on that exact prompt."""
    from dataclasses import replace

    if episode.text_world is None:
        raise TrainingDataError(
            f"{episode.directory}: no {TEXT_WORLD_FILE} (--text-observation needs the world description the text "
            "mode sends; records of homie data collect have it)"
        )
    return [replace(s, prompt=episode.text_world + s.prompt) for s in steps]


def _no_images(step: Step) -> Step:
    from dataclasses import replace

    return replace(step, images=())


def _relative_images(step: Step, image_dir: str) -> Step:
    from dataclasses import replace

    return replace(step, images=tuple(f"{image_dir}/{Path(p).name}" for p in step.images))


@dataclass
class Built:
    """What :func:`collect` made, before writing."""

    sft: list[tuple[int, Step]]
    pairs: list[tuple[int, Pair]]
    stats: BuildStats


def collect(
    runs: Sequence[str | Path], kind: DataKind, options: BuildOptions, rewriter: Rewriter | None = None
) -> tuple[Built, list[EpisodeData]]:
    """Read the records and make the samples (nothing written)."""
    started = time.perf_counter()
    if kind not in ("sft", "dpo"):
        raise TrainingDataError(f"unknown data kind {kind!r}; use sft or dpo")
    if options.prompt_format not in ("runtime", "paper"):
        raise TrainingDataError(f"unknown prompt format {options.prompt_format!r}; use runtime or paper")
    if options.rewrites < 0:
        raise TrainingDataError(f"--rewrites must be >= 0, got {options.rewrites}")
    loaded = load_episodes(runs, split=options.split, successful_only=options.successful_only)
    rewriter = rewriter or TemplateRewriter()
    variants = 1 + options.rewrites
    sft_all: list[tuple[int, Step]] = []
    pairs_all: list[tuple[int, Pair]] = []
    dropped_failed = 0
    refused = 0
    pairs_dropped: Counter[str] = Counter()
    for k in range(variants):
        sft_k: list[Step] = []
        replans_k: list[Pair] = []
        for episode in loaded.episodes:
            variant, n_refused = rewrite_episode(episode, rewriter, k)
            refused += n_refused
            result = sift(episode_steps(episode, variant, k, options), options.replan_from_execution_errors)
            if k == 0:
                dropped_failed += result.dropped_failed
            sft_k.extend(result.sft)
            replans_k.extend(result.replans)
            pairs_dropped.update({f"replan: {key}": v for key, v in result.replans_skipped.items()})
        sft_all.extend((k, s) for s in sft_k)
        if kind == "dpo":
            augmented, dropped = augment(sft_k)
            pairs_dropped.update(dropped)
            pairs_all.extend((k, p) for p in [*replans_k, *augmented])  # re-plan pairs first, as in the paper
    if kind == "sft":
        per_kind = {"sft": len(sft_all)}
        per_variant = Counter(f"v{k}" for k, _ in sft_all)
        samples = len(sft_all)
    else:
        per_kind = {name: 0 for name in PAIR_KINDS}
        per_kind.update(Counter(p.kind for _, p in pairs_all))
        per_variant = Counter(f"v{k}" for k, _ in pairs_all)
        samples = len(pairs_all)
    stats = BuildStats(
        kind=kind,
        episodes=len(loaded.episodes),
        variants=variants,
        samples=samples,
        per_kind=per_kind,
        per_variant=dict(sorted(per_variant.items())),
        end_samples=sum(1 for _, s in sft_all if s.is_end),
        failed_subtasks_dropped=dropped_failed,
        episodes_left_out=loaded.skipped,
        pairs_dropped={k: v for k, v in pairs_dropped.items() if v},
        rewrites_refused=refused,
        recorded_input_rounds=sum(
            1 for e in loaded.episodes for r in e.rounds if r.model_input is not None
        ) if options.recorded_input and options.prompt_format == "runtime" else 0,
        options={**asdict(options), "rewriter": rewriter.name},
    )
    stats.seconds = time.perf_counter() - started
    return Built(sft_all, pairs_all, stats), loaded.episodes


def _sft_rows(built: Built, thoughtless: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, paper = [], []
    for k, step in built.sft:
        answer = step.decision() if thoughtless else step.answer()
        rows.append(
            {
                "id": step.id,
                "variant": k,
                "prompt": step_messages(step),
                "completion": [{"role": "assistant", "content": answer}],
                "images": list(step.images),
            }
        )
        earlier = [{"from": "human" if role == "user" else "gpt", "value": text} for role, text in step.context]
        paper.append(
            {
                "id": step.id,
                "image": list(step.images),
                "conversations": [*earlier, {"from": "human", "value": step.prompt}, {"from": "gpt", "value": answer}],
            }
        )
    return rows, paper


def _dpo_rows(built: Built) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, paper = [], []
    counts: Counter[str] = Counter()
    for k, pair in built.pairs:
        counts[pair.step.id] += 1
        rows.append(
            {
                "id": f"{pair.step.id}_{pair.kind}_{counts[pair.step.id]}",
                "kind": pair.kind,
                "variant": k,
                "prompt": step_messages(pair.step),
                "chosen": [{"role": "assistant", "content": pair.chosen}],
                "rejected": [{"role": "assistant", "content": pair.rejected}],
                "images": list(pair.step.images),
            }
        )
        paper.append({"prompt": pair.step.prompt, "chosen": pair.chosen, "rejected": pair.rejected})
    return rows, paper


def _link_images(episodes: Sequence[EpisodeData], folder: Path) -> int:
    count = 0
    for episode in episodes:
        sources = [p for r in episode.rounds for p in r.images]
        if not sources:
            continue
        target = folder / "images" / episode.key
        target.mkdir(parents=True, exist_ok=True)
        for source in sources:
            destination = target / Path(source).name
            try:
                os.link(source, destination)
            except OSError:  # another file system, or links not allowed
                shutil.copyfile(source, destination)
            count += 1
    return count


def check_out_dir(out: Path) -> Path:
    """Refuse an output folder that exists and is not empty (one line, before any work)."""
    out = out.expanduser().absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TrainingDataError(f"output {out} exists and is not an empty folder; choose another --out")
    parent = out.parent
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise TrainingDataError(f"output folder {parent} is not writable")
    return out


def write_dataset(rows: list[dict[str, Any]], path: Path) -> None:
    """The rows as one parquet file, the format ``datasets.load_dataset("parquet", ...)`` and so trl's trainers
    load (written with pyarrow, which ``datasets`` is built on, to skip its progress bars)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise TrainingDataError("writing the data set needs pyarrow: pip install -e '.[train]'") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), str(path))


def build(
    runs: Sequence[str | Path],
    out: str | Path,
    kind: DataKind,
    options: BuildOptions | None = None,
    rewriter: Rewriter | None = None,
) -> BuildStats:
    """Build the ``kind`` data set from the records under ``runs`` into ``out`` (see the module docstring)."""
    options = options or BuildOptions()
    target = check_out_dir(Path(out))
    built, episodes = collect(runs, kind, options, rewriter)
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        publish(tmp)
        rows, paper = _sft_rows(built, options.thoughtless) if kind == "sft" else _dpo_rows(built)
        write_dataset(rows, tmp / DATA_FILE)
        with open(tmp / f"{kind}.json", "w", encoding="utf-8") as fh:
            json.dump(paper, fh, ensure_ascii=False, indent=1)
        if options.images:
            built.stats.images = _link_images(episodes, tmp)
        built.stats.seconds += time.perf_counter() - started
        with open(tmp / STATS_FILE, "w", encoding="utf-8") as fh:
            json.dump(asdict(built.stats), fh, indent=2)
            fh.write("\n")
        if target.exists():
            target.rmdir()  # empty (checked above)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("%s data set written to %s", kind, target)
    return built.stats

"""``homie data build sft|dpo``: episode records -> EMMOE's SFT or DPO data as a Hugging Face data set.

Output folder (written into a hidden temp folder and renamed into place: a failed build leaves nothing)::

    OUT/data/train.parquet   the data set trl reads (datasets.load_dataset("parquet", data_files=...)):
                             SFT: id, variant, prompt (chat messages), completion (one assistant message), images
                             DPO: id, kind, variant, prompt, chosen, rejected (assistant messages), images
    OUT/sft.json | dpo.json  the paper's own layout (LLaVA conversations; prompt/chosen/rejected strings)
    OUT/images/<episode>/    the views of the rounds used (hard links to the records' PNGs, else copies)
    OUT/stats.json           counts per kind and variant, what was left out and why, the settings

``--episodes`` (SFT, text mode): one row per episode instead of one per round, ``id, variant, messages,
answer_loss``: the whole chat the text planner holds at the episode's end (:class:`TextTranscript`, the form it
plans in by default), the expert's answer after every user turn, and one flag per assistant turn saying whether
the trainer learns it (the rounds that succeeded and the last, as appendix F.2's ``data_sift``; a failed round
stays in the chat, as it does when the planner runs, but its answer is not trained on).
``--episodes`` with DPO: the same pairs, each prompted with its episode's chat up to the pair's round (the context
the planner decides in), so that DPO continues a model trained on episode chats in its own form.

Counts follow the paper's formula (spec: SFT = V x successful subtasks incl. End; DPO = V x (3 x (SFT per
variant - End samples) + re-plan pairs), V = 1 + rewrites), minus the pairs :mod:`~homiebot.training.emmoe`
drops for being empty (each counted in ``stats.json``).
"""

from __future__ import annotations

import json
import logging
import os
import random
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
from homiebot.training.episodes import TEXT_WORLD_FILE, EpisodeData, RoundData, TrainingDataError, load_episodes
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
    # SFT only: one sample per episode, the text planner's growing chat (its default, include_history=True) with an
    # answer after every round, instead of one single-turn sample per round (:func:`episode_rows`).
    episodes: bool = False
    #: ``episodes``: later user turns in the compact form (:func:`homiebot.planner.text_planning.compact_turn`), as
    #: the planner sends them with ``compact_turns``.
    compact_turns: bool = False
    #: SFT: count the prompts' tokens with this tokenizer (a bundled model's name or a folder) for stats.json.
    tokenizer: str | None = None
    #: SFT: re-plans after an error code that has fewer samples than this are repeated (whole copies) until it
    #: has at least this many, so that a rare code (D1, E2) weighs like the others; 0 repeats nothing.
    min_replans: int = 0
    #: SFT: leave out the samples whose prompt a built SFT set (a folder) holds verbatim, so that a validation set
    #: scores prompts its model never trained on.
    exclude_seen: str | None = None
    #: DPO: keep only pairs of these kinds (PAIR_KINDS); empty keeps every kind.
    pair_kinds: tuple[str, ...] = ()
    #: DPO: at most this many pairs of each kind, a uniform sample with a fixed seed (0: all). Per kind, because the
    #: three augmented kinds come from every step and the re-plans only from failures (22,241 against 348 in the
    #: episode collections): a sample of all would hold almost no re-plan. With ``episodes`` each pair's prompt is
    #: the growing chat up to its round, so a pair costs a forward pass over that chat for the policy and one for
    #: the reference, on each side: EMMOE's 8,984 pairs would be days on two CPU cores.
    max_pairs_per_kind: int = 0


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
    #: SFT (homiebot.training.data_check): prompts with differing answers, the mix of actions and re-plans, and
    #: the prompts' token counts (with BuildOptions.tokenizer; None without).
    ambiguity: dict[str, Any] = field(default_factory=dict)
    mix: dict[str, dict[str, int]] = field(default_factory=dict)
    tokens: dict[str, Any] | None = None
    #: Copies of re-plan samples added per error code (BuildOptions.min_replans); the mix counts them.
    replan_copies: dict[str, int] = field(default_factory=dict)
    #: Samples left out because the ``exclude_seen`` set holds their prompt.
    seen_excluded: int = 0

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
        if self.ambiguity:
            a = self.ambiguity
            out.append(
                f"  distinct prompts: {a['distinct_prompts']}; ambiguous (same prompt, different answers): "
                f"{a['ambiguous_prompts']} prompts, {a['ambiguous_samples']} samples; different decisions: "
                f"{a['ambiguous_decision_prompts']} prompts"
            )
        if self.mix:
            out.append("  actions: " + ", ".join(f"{k} {v}" for k, v in self.mix["actions"].items()))
            replans = self.mix["replans_after"]
            out.append("  re-plans after: " + (", ".join(f"{k} {v}" for k, v in replans.items()) or "none"))
        if self.seen_excluded:
            out.append(f"  left out, their prompt is in the excluded set: {self.seen_excluded}")
        if self.replan_copies:
            out.append("  re-plan copies added: " + ", ".join(f"{k} {v}" for k, v in self.replan_copies.items()))
        if self.tokens:
            t = self.tokens
            out.append(f"  prompt tokens ({t['tokenizer']}): median {t['median']:.0f}, p95 {t['p95']:.0f}, max {t['max']}")
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
    if options.text_observation:
        # The text mode's own chat of each round where the collection kept it (the world as it was then), else
        # the episode's first world description before the instruction (records of older collections).
        recorded = [m if m is not None else r.text_input for m, r in zip(recorded, variant.rounds, strict=True)]
        if not all(recorded):
            steps = _with_text_world(steps, episode)
    steps = [
        step if model_input is None
        else recorded_step(step, model_input, options.system_prompt, episode.instruction, variant.instruction)
        for step, model_input in zip(steps, recorded, strict=True)
    ]
    if image_dir is None:
        return [_no_images(s) for s in steps]
    return [_relative_images(s, image_dir) for s in steps]


@dataclass(frozen=True)
class EpisodeChat:
    """One episode as the text planner's growing chat (:func:`episode_chat`)."""

    id: str
    messages: list[dict[str, str]]  # role / content, the system turn first when kept
    answer_loss: list[bool]  # one per assistant turn: trained on (True) or context only
    end: bool  # the last trained answer is End
    #: Per round (the step ids of :func:`runtime_steps`): how many of ``messages`` the round's prompt is, i.e. the
    #: chat up to and including its user turn. A DPO pair of that round uses this prefix as its prompt.
    prompt_ends: dict[str, int] = field(default_factory=dict)

    def prompt_of(self, step_id: str) -> list[dict[str, str]]:
        try:
            return self.messages[: self.prompt_ends[step_id]]
        except KeyError:
            raise TrainingDataError(f"{self.id}: no round {step_id!r} in the episode's chat") from None


def episode_chat(episode: EpisodeData, variant: EpisodeData, k: int, options: BuildOptions) -> EpisodeChat:
    """The chat the hf planner's text mode holds at the end of ``variant`` with the expert as its model: every round
    sent through :class:`~homiebot.planner.text_planning.TextTranscript` (the runtime's own bookkeeping: the world
    description in the first user turn, later turns with what changed) and answered with the recorded answer.

    Replaying the runtime's class, not a copy of its rules, keeps training equal to inference when the prompt's
    wording changes. A round is trained on when it succeeded, and the last one (End) always (``data_sift``)."""
    from homiebot.planner.base import PlanRequest
    from homiebot.planner.text_planning import TextTranscript

    steps = runtime_steps(variant, f"{episode.key}_v{k}", None, original_task=episode.instruction)
    transcript = TextTranscript(compact=options.compact_turns)
    flags: list[bool] = []
    last = len(steps) - 1
    for j, (step, recorded, original) in enumerate(zip(steps, variant.rounds, episode.rounds, strict=True)):
        request = PlanRequest(
            system_prompt=episode.system_prompt,
            instruction=step.prompt,
            images=(),
            task=variant.instruction,
            round_index=recorded.index,
            world_description=_round_world(episode, original),
        )
        conversation = transcript.conversation(request)
        fresh = original.text_input
        if j == 0 and k == 0 and fresh is not None and fresh[-1] != ("user", conversation[-1].text):
            raise TrainingDataError(
                f"{episode.directory}: round 1 of the replayed chat differs from the text mode's recorded prompt; "
                "collect the records again with this version (homie data collect)"
            )
        if step.subtask is None:
            answer = recorded.raw_output  # context only: what the planner said, unparseable
        else:
            answer = step.decision() if options.thoughtless else step.answer()
        transcript.keep(conversation, answer, request)
        flags.append(step.subtask is not None and (j == last or step.succeeded))
    messages = [
        {"role": m.role, "content": m.text}
        for m in transcript.turns
        if options.system_prompt or m.role != "system"
    ]
    # The transcript keeps every turn (one user and one assistant turn per round), so round j's prompt is the
    # chat up to its user turn, a prefix of the final chat.
    user_turns = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if len(user_turns) != len(steps):
        raise TrainingDataError(
            f"{episode.directory}: the replayed chat has {len(user_turns)} user turns for {len(steps)} rounds"
        )
    ends = {step.id: i + 1 for step, i in zip(steps, user_turns, strict=True)}
    return EpisodeChat(f"{episode.key}_v{k}", messages, flags, bool(steps) and steps[-1].is_end and flags[-1], ends)


def _round_world(episode: EpisodeData, recorded: RoundData) -> str:
    """The world description the text mode had in this round: as recorded beside the round's fresh chat
    (``world``), else from an older record's fresh chat (its user turn was the description, a newline, the
    instruction), else the episode's first description (older records still)."""
    if recorded.text_world_now is not None:
        return recorded.text_world_now
    if recorded.text_input is not None and recorded.text_input[-1][0] == "user":
        user = recorded.text_input[-1][1]
        if user.endswith("\n" + recorded.instruction):
            return user[: len(user) - len(recorded.instruction) - 1]
    if episode.text_world is None:
        raise TrainingDataError(
            f"{episode.directory}: no {TEXT_WORLD_FILE} (--episodes needs the world description the text mode "
            "sends; records of homie data collect have it)"
        )
    return episode.text_world.partition("\n")[2]  # without the heading, which the transcript writes


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
    chats: list[tuple[int, EpisodeChat]] = field(default_factory=list)  # BuildOptions.episodes


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
    if options.episodes and options.prompt_format != "runtime":
        raise TrainingDataError("--episodes builds data in the runtime format (the text planner's chat) only")
    unknown = sorted(set(options.pair_kinds) - set(PAIR_KINDS))
    if unknown:
        raise TrainingDataError(f"unknown pair kind {', '.join(unknown)}; use {', '.join(PAIR_KINDS)}")
    if (options.pair_kinds or options.max_pairs_per_kind) and kind != "dpo":
        raise TrainingDataError("--pair-kinds and --max-pairs-per-kind choose DPO pairs; they need kind dpo")
    if options.max_pairs_per_kind < 0:
        raise TrainingDataError(f"--max-pairs-per-kind must be >= 0, got {options.max_pairs_per_kind}")
    if options.compact_turns and not options.episodes:
        raise TrainingDataError("--compact-turns is a form of the growing chat: it needs --episodes")
    loaded = load_episodes(runs, split=options.split, successful_only=options.successful_only)
    rewriter = rewriter or TemplateRewriter()
    variants = 1 + options.rewrites
    sft_all: list[tuple[int, Step]] = []
    pairs_all: list[tuple[int, Pair]] = []
    dropped_failed = 0
    refused = 0
    pairs_dropped: Counter[str] = Counter()
    chats: list[tuple[int, EpisodeChat]] = []
    for k in range(variants):
        sft_k: list[Step] = []
        replans_k: list[Pair] = []
        for episode in loaded.episodes:
            variant, n_refused = rewrite_episode(episode, rewriter, k)
            refused += n_refused
            if options.episodes:
                chats.append((k, episode_chat(episode, variant, k, options)))
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
    if kind == "dpo":
        pairs_all, sampled_out = choose_pairs(pairs_all, options.pair_kinds, options.max_pairs_per_kind)
        pairs_dropped.update(sampled_out)
    copies: dict[str, int] = {}
    if kind == "sft" and not options.episodes and options.min_replans > 0:
        sft_all, copies = repeat_rare_replans(sft_all, options.min_replans)
    excluded = 0
    if kind == "sft" and not options.episodes and options.exclude_seen:
        before = len(sft_all)
        sft_all = _unseen(sft_all, Path(options.exclude_seen).expanduser())
        excluded = before - len(sft_all)
    if options.episodes and kind == "sft":
        trained = sum(sum(c.answer_loss) for _, c in chats)
        answers = sum(len(c.answer_loss) for _, c in chats)
        per_kind = {"episodes": len(chats), "answers trained": trained, "answers in context only": answers - trained}
        per_variant = Counter(f"v{k}" for k, _ in chats)
        samples = len(chats)
    elif kind == "sft":
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
        replan_copies=copies,
        seen_excluded=excluded,
    )
    if kind == "sft":
        _check_sft(sft_all, options, stats, chats)
    stats.seconds = time.perf_counter() - started
    return Built(sft_all, pairs_all, stats, chats), loaded.episodes


def choose_pairs(
    pairs: Sequence[tuple[int, Pair]], kinds: Sequence[str], per_kind: int
) -> tuple[list[tuple[int, Pair]], dict[str, int]]:
    """The pairs of ``kinds`` (all when empty), then at most ``per_kind`` of each kind (0: all) drawn uniformly with
    seed 0, in their original order; and how many each rule left out (for the stats)."""
    kept = [p for p in pairs if not kinds or p[1].kind in kinds]
    left_out = {"kind not chosen (--pair-kinds)": len(pairs) - len(kept)}
    if per_kind:
        rng = random.Random(0)
        chosen: set[int] = set()
        for name in PAIR_KINDS:
            of_kind = [i for i, (_, p) in enumerate(kept) if p.kind == name]
            chosen.update(of_kind if len(of_kind) <= per_kind else rng.sample(of_kind, per_kind))
        left_out["sampled out (--max-pairs-per-kind)"] = len(kept) - len(chosen)
        kept = [p for i, p in enumerate(kept) if i in chosen]
    return kept, left_out


def _unseen(sft: Sequence[tuple[int, Step]], reference: Path) -> list[tuple[int, Step]]:
    """The samples whose prompt (every message) the built SFT set at ``reference`` does not hold."""
    from homiebot.training.data_check import read_sft_dataset

    seen = {sample.messages for sample in read_sft_dataset(reference)[0]}
    return [
        (k, step) for k, step in sft if tuple((m["role"], m["content"]) for m in step_messages(step)) not in seen
    ]


def repeat_rare_replans(
    sft: Sequence[tuple[int, Step]], minimum: int
) -> tuple[list[tuple[int, Step]], dict[str, int]]:
    """The samples, with the re-plans after each error code that has fewer than ``minimum`` of them repeated
    (copy j of a sample gets the id suffix ``_copy<j>``) until the code has at least ``minimum``; and the copies
    added per code. Each sample of a code is repeated the same number of times."""
    from dataclasses import replace

    by_code: dict[str, list[tuple[int, Step]]] = {}
    for k, step in sft:
        if step.after_error:
            by_code.setdefault(step.after_error, []).append((k, step))
    out = list(sft)
    added: dict[str, int] = {}
    for code, group in sorted(by_code.items()):
        if len(group) >= minimum:
            continue
        repeats = -(-minimum // len(group))  # ceil: every sample the same number of times
        out.extend((k, replace(step, id=f"{step.id}_copy{j}")) for j in range(2, repeats + 1) for k, step in group)
        added[code] = (repeats - 1) * len(group)
    return out, added


def _check_sft(
    sft: Sequence[tuple[int, Step]], options: BuildOptions, stats: BuildStats,
    chats: Sequence[tuple[int, EpisodeChat]] = (),
) -> None:
    """The data check's figures (homiebot.training.data_check) of the SFT samples, into ``stats``. With episode
    chats the ambiguity is the chats' (each learned answer after the chat before it, what the model reads), not
    the rounds' single-turn prompts."""
    from homiebot.training.data_check import (
        Sample,
        find_ambiguities,
        load_tokenizer,
        sample_mix,
        samples_from_episode_rows,
        token_lengths,
    )

    samples = [
        Sample(
            step.id,
            tuple((m["role"], m["content"]) for m in step_messages(step)),
            step.decision() if options.thoughtless else step.answer(),
        )
        for _, step in sft
    ]
    if options.episodes:
        rows = [{"id": c.id, "messages": c.messages, "answer_loss": c.answer_loss} for _, c in chats]
        stats.ambiguity = asdict(find_ambiguities(samples_from_episode_rows(rows)))
    else:
        stats.ambiguity = asdict(find_ambiguities(samples))
    stats.mix = sample_mix(samples, {step.id: step.after_error for _, step in sft if step.after_error})
    if options.tokenizer:
        stats.tokens = asdict(token_lengths(samples, load_tokenizer(options.tokenizer), options.tokenizer))


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
                "after_error": step.after_error,
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


def _episode_rows(built: Built) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows, paper = [], []
    for k, chat in built.chats:
        rows.append({"id": chat.id, "variant": k, "messages": chat.messages, "answer_loss": chat.answer_loss})
        speaker = {"system": "system", "user": "human", "assistant": "gpt"}
        paper.append(
            {"id": chat.id, "conversations": [{"from": speaker[m["role"]], "value": m["content"]} for m in chat.messages]}
        )
    return rows, paper


def _dpo_rows(built: Built) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One row per pair. With episode chats (``BuildOptions.episodes``) a pair's prompt is its episode's growing
    chat up to the pair's round, as the planner sends it with ``include_history=True``; else the round's own
    prompt (:func:`step_messages`)."""
    rows, paper = [], []
    counts: Counter[str] = Counter()
    chats = {chat.id: chat for _, chat in built.chats}
    for k, pair in built.pairs:
        counts[pair.step.id] += 1
        chat = chats.get(pair.step.episode)
        rows.append(
            {
                "id": f"{pair.step.id}_{pair.kind}_{counts[pair.step.id]}",
                "kind": pair.kind,
                "variant": k,
                "prompt": step_messages(pair.step) if chat is None else chat.prompt_of(pair.step.id),
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
    """Build the ``kind`` data set from the records under ``runs`` into ``out`` (see the module docstring). MuEP
    collections (``homie data collect --suite muep``) build their own episode set
    (:func:`homiebot.training.muep_data.build_muep`)."""
    from homiebot.training.muep_data import build_muep, is_muep_collection

    options = options or BuildOptions()
    muep = [is_muep_collection(run) for run in runs]
    if any(muep):
        if not all(muep):
            raise TrainingDataError("MuEP collections and EMMOE records build different sets: build each on its own "
                                    "and give both to homie train sft --data A --data B")
        return build_muep(runs, out, kind, options)
    target = check_out_dir(Path(out))
    built, episodes = collect(runs, kind, options, rewriter)
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        publish(tmp)
        if options.episodes and kind == "sft":
            rows, paper = _episode_rows(built)
        else:
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

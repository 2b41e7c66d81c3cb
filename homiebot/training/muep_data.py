"""Training data for the MuEP-style suite: the text expert's episodes (``homie data collect --suite muep``,
:mod:`homiebot.eval.muep_collect`) as an SFT episode set.

``homie data build sft --from OUT --episodes --rewrites 0`` (:func:`build_muep`) writes each successful episode as
the chat the MuEP suite's ``--planner hf`` plays in (:func:`homiebot.textworld.chat.episode_messages`: ALFWorld's
intro, then command and observation turn after turn, no system turn), in the rows of EMMOE's episode sets (``id,
variant, messages, answer_loss``), so that ``homie data check`` reads them and ``homie train sft --data A --data B``
concatenates them with an EMMOE episode set. Every command of a successful expert episode is learned (a command the
game answered "Nothing happens." would stay in the chat unlearned; the expert plays none).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homiebot.files import read_json_lines
from homiebot.training.episodes import TrainingDataError

if TYPE_CHECKING:
    from homiebot.training.build import BuildOptions, BuildStats

#: What a collection's ``collect.json`` names (homiebot.eval.muep_collect.SUITE) and its episodes file.
SUITE = "muep"
MANIFEST = "collect.json"
EPISODES_FILE = "episodes.jsonl"
SPLITS = ("train", "validation", "all")


def is_muep_collection(path: str | Path) -> bool:
    """Whether ``path`` is a MuEP collection (its ``collect.json`` names the suite)."""
    manifest = Path(path).expanduser() / MANIFEST
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("suite") == SUITE
    except (OSError, ValueError):
        return False


def read_episodes(root: Path) -> list[dict[str, Any]]:
    path = root / EPISODES_FILE
    if not path.is_file():
        raise TrainingDataError(f"{root}: no {EPISODES_FILE} (collect it with homie data collect --suite muep)")
    try:
        return read_json_lines(path, "an episode record")
    except ValueError as err:
        raise TrainingDataError(str(err)) from None


def command_verb(command: str) -> str:
    """The verb of an ALFWorld command (``go to``, ``take``, ``move``, ``open``, ...), for the action mix."""
    words = command.split()
    if not words:
        return "empty"
    return "go to" if words[:2] == ["go", "to"] else words[0]


def muep_rows(runs: Sequence[str | Path], split: str = "train") -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The episode rows of the successful episodes of ``split`` (train, validation or all) and what was left out."""
    from homiebot.textworld.chat import episode_messages
    from homiebot.textworld.world import NOTHING_HAPPENS

    if split not in SPLITS:
        raise TrainingDataError(f"unknown --split {split!r} for a MuEP collection; use train, validation or all")
    rows: list[dict[str, Any]] = []
    left: Counter[str] = Counter()
    for run in runs:
        root = Path(run).expanduser()
        for record in read_episodes(root):
            if split != "all" and record["split"] != split:
                left["other split"] += 1
                continue
            if not record["success"]:
                left["not successful"] += 1
                continue
            if not record["transcript"]:
                left["no command (the goal held at the start)"] += 1
                continue
            transcript = [(c, o) for c, o in record["transcript"]]
            rows.append({
                "id": f"{record['task']}_run{record['run']}_seed{record['seed']}",
                "variant": 0,
                "messages": episode_messages(record["intro"], transcript),
                # every command of a successful expert episode is learned, but one the game did not take
                "answer_loss": [o.strip() != NOTHING_HAPPENS for _, o in transcript],
            })
    return rows, dict(left)


def build_muep(runs: Sequence[str | Path], out: str | Path, kind: str, options: BuildOptions) -> BuildStats:
    """``homie data build sft --episodes`` on MuEP collections: the rows (:func:`muep_rows`) written as
    :func:`homiebot.training.build.build` writes an episode set, with its ``stats.json`` (counts, ambiguity, the
    mix of command verbs, prompt tokens with ``--tokenizer``)."""
    import os
    import shutil
    import tempfile

    from homiebot.files import publish
    from homiebot.training.build import DATA_FILE, STATS_FILE, BuildStats, check_out_dir, write_dataset
    from homiebot.training.data_check import (
        find_ambiguities,
        load_tokenizer,
        samples_from_episode_rows,
        token_lengths,
    )

    if kind != "sft" or not options.episodes:
        raise TrainingDataError("a MuEP collection builds an SFT episode set only: homie data build sft --episodes")
    if options.rewrites:
        raise TrainingDataError("a MuEP collection takes no rewrites (ALFWorld's instruction templates): --rewrites 0")
    if options.compact_turns or options.thoughtless or options.min_replans or options.exclude_seen:
        raise TrainingDataError("--compact-turns, --thoughtless, --min-replans and --exclude-prompts-of are EMMOE's; "
                                "a MuEP collection has one chat form (docs/training.md)")
    split = options.split
    started = time.perf_counter()
    target = check_out_dir(Path(out))
    rows, left = muep_rows(runs, split)
    if not rows:
        raise TrainingDataError(f"no successful episode of split {split} in {', '.join(map(str, runs))}")
    samples = samples_from_episode_rows(rows)
    trained = sum(sum(r["answer_loss"]) for r in rows)
    answers = sum(len(r["answer_loss"]) for r in rows)
    stats = BuildStats(
        kind="sft", episodes=len(rows), variants=1, samples=len(rows),
        per_kind={"episodes": len(rows), "answers trained": trained, "answers in context only": answers - trained},
        per_variant={"v0": len(rows)}, end_samples=0, failed_subtasks_dropped=answers - trained,
        episodes_left_out=left,
        options={**asdict(options), "split": split, "suite": SUITE, "system_prompt": False},
    )
    stats.ambiguity = asdict(find_ambiguities(samples))
    stats.mix = {"actions": dict(Counter(command_verb(s.answer) for s in samples).most_common()), "replans_after": {}}
    if options.tokenizer:
        tokenizer = load_tokenizer(options.tokenizer)
        stats.tokens = asdict(token_lengths(samples, tokenizer, options.tokenizer))
        lengths = [len(tokenizer(tokenizer.apply_chat_template(r["messages"], tokenize=False),
                                 add_special_tokens=False)["input_ids"]) for r in rows]
        stats.tokens["episode_median"] = statistics.median(lengths)
        stats.tokens["episode_max"] = max(lengths)
        stats.tokens["episode_total"] = sum(lengths)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        publish(tmp)
        write_dataset(rows, tmp / DATA_FILE)
        speaker = {"user": "human", "assistant": "gpt"}
        paper = [{"id": r["id"], "conversations": [{"from": speaker[m["role"]], "value": m["content"]}
                                                   for m in r["messages"]]} for r in rows]
        (tmp / "sft.json").write_text(json.dumps(paper, ensure_ascii=False, indent=1), encoding="utf-8")
        stats.seconds = time.perf_counter() - started
        (tmp / STATS_FILE).write_text(json.dumps(asdict(stats), indent=2) + "\n", encoding="utf-8")
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats

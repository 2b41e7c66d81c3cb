"""Episode records as training material: the rounds of each recorded episode, with its task's split.

A *runs* path is an evaluation directory (``DIR/episodes/<task>/run<r>/``, docs/evaluation.md), a single
episode record (``summary.json`` + ``rounds.jsonl``, docs/records.md), or any folder holding such records
below it. The expert references of an evaluation (``DIR/reference/``) are skipped: they repeat the expert's
noiseless episode on the same seed and would only duplicate samples.

The split of a task comes from the evaluation's ``eval.json`` task snapshot, else from the built-in suite;
builders read only the split they are asked for (EMMOE trains on its 90 training tasks, section 4.2).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from homiebot.data.record import ROUNDS_FILE, SUMMARY_FILE, view_filename
from homiebot.types import VIEW_NAMES, ErrorCode, Subtask

log = logging.getLogger(__name__)

#: Error codes that make a decision wrong (EMMOE section 3.3: logical, distance and format errors). An
#: execution error (E1/E2) says the skill failed, not that the planner chose badly.
DECISION_ERRORS = frozenset({"L1", "L2", "L3", "L4", "D1", "D2", "F1", "F2"})

#: Beside a record: the world description the hf planner's text mode sends the model (homie data collect).
TEXT_WORLD_FILE = "text_world.txt"
#: Beside a record: per round, the chat the hf planner's text mode sends with include_history=False, one JSON line
#: ``{"round": n, "messages": [{"role": ..., "content": ...}, ...]}`` (homie data collect).
TEXT_PROMPTS_FILE = "text_prompts.jsonl"


class TrainingDataError(ValueError):
    """Records that cannot be turned into training data; the message names the path and the reason."""


@dataclass(frozen=True)
class RoundData:
    """One recorded round (docs/records.md ``rounds.jsonl``)."""

    index: int
    instruction: str  # the exact instruction text the loop sent (appendix D's generate_instruction)
    raw_output: str
    analysis: str
    subtask: Subtask | None  # None when the answer could not be parsed (F1)
    model: str
    error_code: str
    feedback: str  # "None" on success, else the error message
    inventory_before: tuple[str, ...]
    inventory: tuple[str, ...]  # after the round
    images: tuple[str, ...]  # the four views the round was decided on (front, left, back, right), or ()
    #: The chat the planner's model was sent for this round's answer, (role, text) per message, as the record keeps
    #: it (``model_calls``): the round's last call, when the round's answer is that call's answer (a ReAct round's
    #: is rewritten by the planner: None then). None for a round without a recorded model call.
    model_input: tuple[tuple[str, str], ...] | None = None
    #: The chat the hf planner's text mode would send a text model in this round (TEXT_PROMPTS_FILE), (role,
    #: text) per message; None for records without it.
    text_input: tuple[tuple[str, str], ...] | None = None
    #: The text mode's world description of this round as it is now (TEXT_PROMPTS_FILE's ``world``); None for
    #: records without it.
    text_world_now: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.error_code == ErrorCode.OK.value

    @property
    def is_end(self) -> bool:
        return self.subtask is not None and self.subtask.action.strip().lower() == "end"


@dataclass(frozen=True)
class EpisodeData:
    """One recorded episode: an EMMOE trajectory."""

    key: str  # "<task>_run<r>" (unique within a build)
    task_id: str
    instruction: str  # the task text
    split: str  # train | validation | test | unknown
    success: bool | None
    system_prompt: str
    rounds: tuple[RoundData, ...]
    directory: Path
    error: str | None = None  # an infrastructure error ended the episode (docs/records.md)
    #: The text planning mode's world description as its first user turn opens with it ("World description:
    #: ...\n"), written by ``homie data collect`` (TEXT_WORLD_FILE); None for other records.
    text_world: str | None = None

    def with_text(self, instruction: str, analyses: Sequence[str]) -> EpisodeData:
        """The same episode with a rewritten task text and analyses (one per round)."""
        if len(analyses) != len(self.rounds):
            raise ValueError("one analysis per round")
        rounds = tuple(replace(r, analysis=a) for r, a in zip(self.rounds, analyses, strict=True))
        return replace(self, instruction=instruction, rounds=rounds)


def find_records(runs: Path) -> Iterator[Path]:
    """Episode record directories under ``runs`` (itself included), sorted, expert references skipped."""
    if not runs.exists():
        raise TrainingDataError(f"{runs}: no such file or directory")
    if (runs / SUMMARY_FILE).is_file():
        yield runs
        return
    found = []
    for root, dirs, files in os.walk(runs):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "reference")
        if SUMMARY_FILE in files and ROUNDS_FILE in files:
            found.append(Path(root))
            dirs[:] = []
    yield from sorted(found)


def _splits_near(record: Path, cache: dict[Path, dict[str, str]]) -> dict[str, str]:
    """Task id -> split from the ``eval.json`` of the evaluation holding ``record`` (two levels up)."""
    eval_dir = record.parent.parent.parent
    if eval_dir not in cache:
        splits: dict[str, str] = {}
        manifest = eval_dir / "eval.json"
        if manifest.is_file():
            try:
                tasks = json.loads(manifest.read_text(encoding="utf-8")).get("tasks", {})
                splits = {str(k): str(v.get("split", "unknown")) for k, v in tasks.items() if isinstance(v, dict)}
            except (json.JSONDecodeError, OSError) as err:
                log.warning("%s: unreadable (%s); splits from the built-in suite", manifest, err)
        cache[eval_dir] = splits
    return cache[eval_dir]


def _suite_split(task_id: str, cache: dict[str, str]) -> str:
    if not cache:
        from homiebot.tasks.suite import all_tasks

        cache.update({t.id: t.split for t in all_tasks()})
        cache.setdefault("", "unknown")
    return cache.get(task_id, "unknown")


def _round(data: dict[str, Any], record: Path) -> RoundData:
    sub = data.get("subtask")
    index = int(data["round"])
    images = tuple(str(record / view_filename(index, v)) for v in VIEW_NAMES)
    return RoundData(
        index=index,
        instruction=str(data["instruction"]),
        raw_output=str(data.get("raw_output", "")),
        analysis=str(data.get("analysis") or ""),
        subtask=None if sub is None else Subtask(sub["action"], sub.get("target"), sub.get("place")),
        model=str(data.get("model") or ""),
        error_code=str(data["error_code"]),
        feedback=str(data.get("feedback", "None")),
        inventory_before=tuple(data.get("inventory_before", ())),
        inventory=tuple(data.get("inventory", ())),
        images=images if all(os.path.isfile(p) for p in images) else (),
        model_input=_model_input(data),
    )


def _model_input(data: dict[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """The messages of the call that produced the round's answer (:attr:`RoundData.model_input`)."""
    calls = data.get("model_calls") or ()
    if not calls or calls[-1]["answer"] != data.get("raw_output", ""):
        return None
    return tuple((str(m["role"]), str(m["content"])) for m in calls[-1]["messages"])


def _text_inputs(record: Path) -> dict[int, tuple[tuple[tuple[str, str], ...], str | None]]:
    """Round index -> the text mode's chat of that round and its world description as it is now
    (TEXT_PROMPTS_FILE; empty without the file, None for the world in older files)."""
    path = record / TEXT_PROMPTS_FILE
    if not path.is_file():
        return {}
    found: dict[int, tuple[tuple[tuple[str, str], ...], str | None]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            messages = tuple((str(m["role"]), str(m["content"])) for m in data["messages"])
            world = data.get("world")
            found[int(data["round"])] = (messages, None if world is None else str(world))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
            raise TrainingDataError(f"{path}:{n}: invalid line: {err}") from None
    return found


def read_record(record: Path, split: str = "unknown") -> EpisodeData:
    """One episode record as :class:`EpisodeData` (:class:`TrainingDataError` naming the file when broken)."""
    try:
        summary = json.loads((record / SUMMARY_FILE).read_text(encoding="utf-8"))
        lines = (record / ROUNDS_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, json.JSONDecodeError) as err:
        raise TrainingDataError(f"{record}: unreadable record: {err}") from None
    rounds = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rounds.append(_round(json.loads(line), record))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise TrainingDataError(f"{record / ROUNDS_FILE}:{n}: invalid round: {err}") from None
    text_inputs = _text_inputs(record)
    if text_inputs:
        rounds = [
            replace(r, text_input=text_inputs[r.index][0], text_world_now=text_inputs[r.index][1])
            if r.index in text_inputs
            else r
            for r in rounds
        ]
    task = str(summary.get("task") or record.name)
    run = record.name if record.name.startswith("run") else f"seed{summary.get('seed', 0)}"
    return EpisodeData(
        key=f"{task}_{run}",
        task_id=task,
        instruction=str(summary.get("instruction", "")),
        split=split,
        success=summary.get("success"),
        system_prompt=str(summary.get("system_prompt") or ""),
        rounds=tuple(rounds),
        directory=record,
        error=summary.get("error"),
        text_world=(record / TEXT_WORLD_FILE).read_text(encoding="utf-8")
        if (record / TEXT_WORLD_FILE).is_file()
        else None,
    )


@dataclass
class LoadedEpisodes:
    """The episodes a build uses and why the others were left out."""

    episodes: list[EpisodeData]
    skipped: dict[str, int]


def load_episodes(runs: Sequence[str | Path], split: str = "train", successful_only: bool = True) -> LoadedEpisodes:
    """Read every record under ``runs``. ``split``: ``train``, ``test``, ``validation`` or ``all``.

    Only successful episodes are kept by default: EMMOE's data are demonstrations that end with [End] and
    reach the goal (section 2.2), so an episode that never finished would teach stopping halfway.
    """
    if split not in ("train", "test", "validation", "all"):
        raise TrainingDataError(f"unknown split {split!r}; use train, test, validation or all")
    episodes: list[EpisodeData] = []
    skipped = {"other split": 0, "not successful": 0, "infrastructure error": 0}
    eval_cache: dict[Path, dict[str, str]] = {}
    suite_cache: dict[str, str] = {}
    keys: set[str] = set()
    for run in runs:
        for record in find_records(Path(run)):
            summary_split = _splits_near(record, eval_cache)
            episode = read_record(record)
            task_split = summary_split.get(episode.task_id) or _suite_split(episode.task_id, suite_cache)
            episode = replace(episode, split=task_split)
            if split not in ("all", task_split):
                skipped["other split"] += 1
                continue
            if episode.error:
                skipped["infrastructure error"] += 1
                continue
            if successful_only and episode.success is not True:
                skipped["not successful"] += 1
                continue
            key = episode.key
            n = 2
            while key in keys:  # the same task and run from two evaluation directories
                key = f"{episode.key}_{n}"
                n += 1
            keys.add(key)
            episodes.append(replace(episode, key=key))
    if not episodes:
        raise TrainingDataError(
            f"no usable episode records under {', '.join(map(str, runs))} "
            f"(split {split}; left out: {', '.join(f'{k} {v}' for k, v in skipped.items() if v) or 'none found'})"
        )
    return LoadedEpisodes(episodes, skipped)

"""MuEP's metrics ("MuEP: A Multimodal Benchmark for Embodied Planning with Foundation Models",
section 3.2 and tables 2-4): SR, IS, GCS, LC and RDI per task type and overall, and the AA / ABAB early stop.

Two conventions, because the paper's prose and its tables disagree (the tables were checked cell by cell; the
derivation is in docs/muep.md):

* ``Convention.TABLES`` (default, comparable with the paper's numbers):
  SR = successes / N; IS = mean steps over the successful episodes (None when there is none);
  GCS = mean over episodes of (goal conditions met / goal conditions of the task), with ALFRED's counts
  (pick & place 1, look in light 2, clean / heat / cool 3, pick two 2); LC = episodes with no
  non-compliant action / N; RDI = episodes with a repetition / N.
* ``Convention.PROSE`` (the formulas as written): GCS = all conditions met / all conditions (pooled);
  LC = valid actions / all actions; RDI = episodes with a repetition / failed episodes.

Overall rows are the same formulas over all episodes of a split (the tables' per-type values weighted by the
number of tasks of each type). Values are percentages, as in the paper.

A **repetition** is MuEP's test (its evaluation clients keep the last actions and stop before an action that
equals the previous one, AA, or that closes an ABAB cycle): :func:`has_repetition` finds one in a finished
episode, :class:`RepetitionStop` is the same test as a policy a loop asks before each action, with the 30-step
cap. An episode the policy stopped is a failure with a repetition.
"""

from __future__ import annotations

import enum
import json
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from homiebot.tasks.alfred import TASK_TYPES, TYPE_LABELS
from homiebot.types import casefold_words

#: MuEP's step cap per episode (section 4.2).
MAX_STEPS = 30


class Convention(str, enum.Enum):
    TABLES = "tables"
    PROSE = "prose"


def normalise_action(text: str) -> str:
    """Case and spacing do not make two actions different (``Go to  Fridge`` is ``go to fridge``)."""
    return casefold_words(text)


def repeats(history: Sequence[str], action: str) -> bool:
    """MuEP's test before an action: the same as the previous one (AA), or the end of an ABAB cycle."""
    a = normalise_action(action)
    q = [normalise_action(h) for h in history[-3:]]
    if q and a == q[-1]:
        return True
    return len(q) >= 3 and q[-1] == q[-3] and q[-2] == a


def has_repetition(actions: Sequence[str]) -> bool:
    """Whether any action of a finished episode would have stopped it under MuEP's test."""
    return any(repeats(actions[:i], actions[i]) for i in range(1, len(actions)))


@dataclass
class RepetitionStop:
    """MuEP's early stop and step cap as a policy: ask :meth:`allows` before each action; a refused action is
    not executed and the episode ends as a failure with a repetition (``stopped``)."""

    max_steps: int = MAX_STEPS
    stop_on_repeat: bool = True
    history: deque[str] = field(default_factory=lambda: deque(maxlen=4))
    steps: int = 0
    stopped: str | None = None  # "repeat" or "max_steps" once it ended the episode

    def reset(self) -> None:
        self.history.clear()
        self.steps = 0
        self.stopped = None

    def allows(self, action: str) -> bool:
        if self.stopped is not None:
            return False
        if self.steps >= self.max_steps:
            self.stopped = "max_steps"
            return False
        if self.stop_on_repeat and repeats(list(self.history), action):
            self.stopped = "repeat"
            return False
        self.history.append(action)
        self.steps += 1
        return True


@dataclass(frozen=True)
class MuepEpisode:
    """What MuEP's metrics need from one episode.

    ``actions``: the actions in order (commands or subtask texts); ``valid``: per action, whether it was
    language-compliant (a command of the game's grammar / a subtask that parses with listed action and model);
    ``stopped_on_repeat``: the early stop ended it (a repetition even if the action list alone shows none).
    """

    task_type: str
    success: bool
    goal_conditions_met: int
    goal_conditions_total: int
    actions: tuple[str, ...] = ()
    valid: tuple[bool, ...] = ()
    split: str = "all"
    stopped_on_repeat: bool = False
    task_id: str = ""

    def __post_init__(self) -> None:
        if self.valid and len(self.valid) != len(self.actions):
            raise ValueError("valid must have one flag per action")
        if not 0 <= self.goal_conditions_met <= self.goal_conditions_total:
            raise ValueError("need 0 <= goal_conditions_met <= goal_conditions_total")

    @property
    def steps(self) -> int:
        return len(self.actions)

    @property
    def repetition(self) -> bool:
        return self.stopped_on_repeat or has_repetition(self.actions)

    @property
    def compliant(self) -> bool:
        return all(self.valid)


@dataclass(frozen=True)
class MuepRow:
    """One row of MuEP's tables, in percent (IS in steps). None where the value is undefined ("-")."""

    n: int
    sr: float | None
    is_steps: float | None
    gcs: float | None
    lc: float | None
    rdi: float | None
    successes: int = 0

    def cells(self) -> list[str]:
        def fmt(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f}"

        return [fmt(self.sr), fmt(self.is_steps), fmt(self.gcs), fmt(self.lc), fmt(self.rdi)]


def _pct(numerator: float, denominator: float) -> float | None:
    return None if denominator == 0 else 100.0 * numerator / denominator


def muep_row(episodes: Iterable[MuepEpisode], convention: Convention | str = Convention.TABLES) -> MuepRow:
    """SR, IS, GCS, LC, RDI over ``episodes`` under the chosen convention."""
    convention = Convention(convention)
    eps = list(episodes)
    n = len(eps)
    wins = [e for e in eps if e.success]
    is_steps = sum(e.steps for e in wins) / len(wins) if wins else None
    if convention is Convention.TABLES:
        gcs = _pct(sum(e.goal_conditions_met / e.goal_conditions_total for e in eps if e.goal_conditions_total), n)
        lc = _pct(sum(e.compliant for e in eps), n)
        rdi = _pct(sum(e.repetition for e in eps), n)
    else:
        gcs = _pct(sum(e.goal_conditions_met for e in eps), sum(e.goal_conditions_total for e in eps))
        lc = _pct(sum(sum(e.valid) for e in eps), sum(len(e.valid) for e in eps))
        rdi = _pct(sum(e.repetition for e in eps if not e.success), n - len(wins))
    return MuepRow(n=n, sr=_pct(len(wins), n), is_steps=is_steps, gcs=gcs, lc=lc, rdi=rdi, successes=len(wins))


def muep_table(
    episodes: Iterable[MuepEpisode], convention: Convention | str = Convention.TABLES
) -> dict[str, dict[str, MuepRow]]:
    """``{split: {task type or "overall": row}}``, types in MuEP's order (those present)."""
    eps = list(episodes)
    table: dict[str, dict[str, MuepRow]] = {}
    for split in sorted({e.split for e in eps}):
        in_split = [e for e in eps if e.split == split]
        rows = {
            t: muep_row([e for e in in_split if e.task_type == t], convention)
            for t in TASK_TYPES
            if any(e.task_type == t for e in in_split)
        }
        others = sorted({e.task_type for e in in_split} - set(TASK_TYPES))
        rows.update({t: muep_row([e for e in in_split if e.task_type == t], convention) for t in others})
        rows["overall"] = muep_row(in_split, convention)
        table[split] = rows
    return table


def format_table(table: dict[str, dict[str, MuepRow]], title: str = "") -> str:
    """Markdown in MuEP's layout: one row per split and type, columns SR / IS / GCS / LC / RDI."""
    lines = [f"### {title}", ""] if title else []
    lines += ["| split | task type | N | SR | IS | GCS | LC | RDI |", "|---|---|---|---|---|---|---|---|"]
    for split, rows in table.items():
        for task_type, row in rows.items():
            label = "Overall" if task_type == "overall" else TYPE_LABELS.get(task_type, task_type)
            lines.append(f"| {split} | {label} | {row.n} | " + " | ".join(row.cells()) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- EMMOE runs


def episode_from_trajectory(
    trajectory: Any, task_type: str, split: str, success: bool, progress: Fraction
) -> MuepEpisode:
    """MuEP's record of an EMMOE episode (a :class:`homiebot.types.Trajectory`).

    Decisions (docs/muep.md): an action is a round's subtask; it is language-compliant unless its feedback is
    F1 (unparseable output, or an action or model outside the lists; F2, an unknown target, is not a language
    fault); the goal conditions are EMMOE's keypath progress TP as a fraction (EMMOE's own partial-completion
    measure; the records keep no final state to count goal conditions on); repetitions are found after the
    fact (EMMOE's loop retries an identical subtask legitimately, so it is not stopped early)."""
    actions = tuple(r.subtask_text for r in trajectory.rounds)
    valid = tuple(r.feedback.code.value != "F1" for r in trajectory.rounds)
    return MuepEpisode(
        task_type=task_type,
        success=success,
        goal_conditions_met=progress.numerator,
        goal_conditions_total=progress.denominator,
        actions=actions,
        valid=valid,
        split=split,
        task_id=str(trajectory.task_id),
    )


def emmoe_episodes(eval_dir: Path | str) -> list[MuepEpisode]:
    """MuEP records of every episode of a ``homie eval`` directory, grouped by the task's first attribute
    (EMMOE-100 has no ALFWorld types; its attributes are the grouping of its table H8)."""
    from homiebot.data.record import read_episode
    from homiebot.tasks.suite import get_task

    root = Path(eval_dir)
    results = root / "results.jsonl"
    if not results.exists():
        raise FileNotFoundError(f"{root} is not a homie eval directory (no results.jsonl)")
    episodes = []
    for line in results.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("kind") != "episode":
            continue
        task = get_task(row["task_id"])
        trajectory = read_episode(root / "episodes" / row["task_id"] / f"run{row['run']}")
        episodes.append(
            episode_from_trajectory(
                trajectory, task.attributes[0], task.split, bool(row["success"]), Fraction(row["tp"])
            )
        )
    return episodes

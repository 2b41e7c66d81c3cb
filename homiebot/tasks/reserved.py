"""The scene seeds no training data may be played on: every evaluation's (docs/training.md, "Held-out seeds").

**What a seed is.** Every suite resets one of the same seven apartments with a *scene seed*, and the scene seed
alone fixes where every object starts (and seeds the skills' execution noise), whichever suite's task plays it:

* EMMOE-100, the PARTNR-style suite and the demonstration tasks: run ``r`` of a task plays ``task.seed + r``
  (:mod:`homiebot.eval.runner`, ``homie eval --runs``, 3 by default);
* the MuEP-style suite (``suites/alfred/muep.yaml``): every task once, on ``task.seed`` (:mod:`homiebot.eval.muep_run`).

The collections turn their options into the same kind of number before asking here: ``homie data collect --suite
emmoe|partnr``, ``homie data corrections`` and DAgger's student play ``task.seed + --seed-offset + r``
(:mod:`homiebot.training.collect`); ``homie data collect --suite muep`` plays its generated tasks on ``--seed-offset +
r`` (:mod:`homiebot.eval.muep_collect`).

**What is reserved.** ``task.seed + r`` for the first :data:`EVALUATION_RUNS` runs of every task of every suite an
evaluation plays (:func:`evaluation_suites`: the suite files and MuEP's), every split, in every apartment: an
episode on another apartment's evaluation seed is not the evaluation's episode, but the check stays one number
compared with one set, which no new suite, apartment or ``--runs`` can slip past. One table, :func:`reserved_seeds`,
is what every collector asks (:func:`seed_clashes`, :func:`refusal`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from homiebot.files import load_yaml
from homiebot.tasks.suite import MUEP_SUITE, MUEP_SUITE_FILE, TaskError, list_suites, load_suite

#: Runs of every task whose scene seeds are reserved: ``homie eval --runs`` up to this many (its default is 3, the
#: targets are measured over 3).
EVALUATION_RUNS = 10


@dataclass(frozen=True)
class SeedClash:
    """One scene seed a collection asked for that an evaluation plays."""

    label: str  # what the collection would have played on it (a task id, or a run)
    seed: int
    suites: tuple[str, ...]  # the suites whose evaluation plays it, by name


def evaluation_suites() -> tuple[str, ...]:
    """Every suite ``homie eval --suite`` plays, by its resolved name: the suite files and MuEP's."""
    return (*list_suites(), MUEP_SUITE)


def task_seeds(suite: str) -> tuple[int, ...]:
    """The scene seed of run 0 of every task of ``suite`` (a name :func:`evaluation_suites` lists), in file order."""
    if suite == MUEP_SUITE:
        # Read here rather than through homiebot.eval.muep_suite (a layer above): its rows carry a ``seed`` each.
        try:
            return tuple(int(row["seed"]) for row in load_yaml(MUEP_SUITE_FILE.read_text(encoding="utf-8")))
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise TaskError(f"invalid MuEP suite {MUEP_SUITE_FILE}: {err}") from None
    return tuple(t.seed for t in load_suite(suite).tasks)


def evaluation_seeds(suite: str, runs: int = EVALUATION_RUNS) -> frozenset[int]:
    """The scene seeds an evaluation of ``suite`` plays in its first ``runs`` runs: ``task.seed + r``."""
    return frozenset(seed + r for seed in task_seeds(suite) for r in range(runs))


@cache
def reserved_seeds(runs: int = EVALUATION_RUNS) -> Mapping[int, tuple[str, ...]]:
    """Scene seed -> the suites whose evaluation plays it (sorted), for every suite of :func:`evaluation_suites`."""
    table: dict[int, set[str]] = {}
    for suite in evaluation_suites():
        for seed in evaluation_seeds(suite, runs):
            table.setdefault(seed, set()).add(suite)
    return MappingProxyType({seed: tuple(sorted(names)) for seed, names in table.items()})


def last_reserved_seed() -> int:
    """The largest reserved scene seed: every seed above it is free."""
    return max(reserved_seeds())


def seed_clashes(played: Iterable[tuple[str, int]]) -> list[SeedClash]:
    """The (label, scene seed) pairs a collection would play that an evaluation plays, sorted by seed then label."""
    reserved = reserved_seeds()
    return sorted((SeedClash(label, seed, reserved[seed]) for label, seed in played if seed in reserved),
                  key=lambda c: (c.seed, c.label))


def refusal(clashes: list[SeedClash], options: str, hint: str) -> str:
    """The one line that refuses a collection: ``options`` (as the user typed them) would play these reserved seeds,
    each named with the suite whose evaluation plays it, then ``hint`` (what would fit)."""
    suites = sorted({s for c in clashes for s in c.suites})
    shown = ", ".join(f"{c.label} seed {c.seed} ({' and '.join(c.suites)})" for c in clashes[:3])
    return (
        f"{options} would collect on {len(clashes)} scene seed(s) that the {' and '.join(suites)} evaluation plays "
        f"({shown}{', ...' if len(clashes) > 3 else ''}; runs 0-{EVALUATION_RUNS - 1} of every task of every suite "
        f"are reserved): {hint}"
    )

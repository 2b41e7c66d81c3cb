"""Keypath nodes (EMMOE appendix C.1): parsing, name resolution and the strict in-order matching of TP.

A keypath is an ordered list of nodes such as ``"[Open, kitchen_drawer]" -> "[Put, short_can, kitchen_drawer]"
-> "[End]"``. Task Progress (section 2.3, eq. 1) matches a trajectory against each keypath "strictly in
sequential order" and keeps the best ratio ``len(k_check) / len(k)``.

Decisions where the paper leaves room (each one is tested in ``tests/eval/test_keypaths.py``):

* **In-order matching is a subsequence match of a prefix.** Nodes are matched one after the other: a step
  can only check the *next* unmatched node, steps that match nothing are skipped, and a node that is never
  matched blocks every later node of that keypath. Matching each step greedily against the next node finds
  the longest matchable prefix, so greedy is exact here, not a heuristic. This is what makes appendix C.1's
  keypath ``[Go to, drawer] -> [Open, ...] -> [Put, ...] -> [End]`` score 2/4 on its 20-step example.
* **Only successful steps match.** A step counts when its feedback is a success. ``[End]`` is the one
  exception: the loop never executes End, so any parsed End output matches the ``[End]`` node.
* **Argument equality goes through the scene.** The action words must be the same EMMOE action (case and
  spacing ignored). Each argument must denote the same thing: both words are resolved by a
  :class:`NameResolver` to the set of scene instances they can mean (an instance name means itself; a category
  word or an alias means every instance with that category or alias), and they match when the two sets share
  an instance. So ``[Go to, kitchen]`` matches ``[Go to, drawer]`` in EMMOE's name map, where both are aliases
  of ``kitchen_counter``, and ``[Pick, apple]`` matches ``[Pick, apple_2]``. Words the scene does not know
  match only an identical word (after :func:`normalize_name`).
* **Argument counts must agree**: ``[Put, can, drawer]`` never matches ``[Put, can]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol, runtime_checkable

from homiebot.perception.grounding import normalize_name
from homiebot.sim.scene import SceneSpec
from homiebot.types import Action, RoundRecord, Subtask, WorldState


class KeypathError(ValueError):
    """A keypath node could not be parsed."""


@dataclass(frozen=True)
class Node:
    """One keypath node or one executed step in comparable form: a canonical action and its arguments."""

    action: str  # the EMMOE action's canonical spelling ("Go to"), or the normalised raw word when unknown
    args: tuple[str, ...] = ()

    @property
    def is_end(self) -> bool:
        return self.action == Action.END.value

    def text(self) -> str:
        return "[" + ", ".join((self.action, *self.args)) + "]"


_BRACKETED = re.compile(r"^\s*\[(.*)\]\s*$", re.DOTALL)


def _canonical_action(word: str) -> str:
    action = Action.parse(word)
    return action.value if action is not None else normalize_name(word)


def parse_node(text: str) -> Node:
    """``"[Put, short_can, kitchen_drawer]"`` -> ``Node("Put", ("short_can", "kitchen_drawer"))``."""
    match = _BRACKETED.match(text)
    if match is None:
        raise KeypathError(f"keypath node {text!r} must be bracketed like '[Go to, fridge]'")
    parts = [p.strip() for p in match.group(1).split(",")]
    if not parts or parts[0] == "":
        raise KeypathError(f"keypath node {text!r} names no action")
    if any(p == "" for p in parts[1:]):
        raise KeypathError(f"keypath node {text!r} has an empty argument")
    return Node(_canonical_action(parts[0]), tuple(parts[1:]))


def parse_keypath(nodes: Sequence[str]) -> tuple[Node, ...]:
    if not nodes:
        raise KeypathError("a keypath needs at least one node")
    return tuple(parse_node(n) for n in nodes)


def node_from_subtask(subtask: Subtask) -> Node:
    args = tuple(a.strip() for a in (subtask.target, subtask.place) if a is not None and a.strip() != "")
    return Node(_canonical_action(subtask.action), args)


# ----------------------------------------------------------------------------------------------- resolution


@runtime_checkable
class NameResolver(Protocol):
    def resolve(self, word: str) -> frozenset[str]:
        """The scene instances ``word`` can denote; empty when the scene does not know the word."""


class SceneNameResolver:
    """Resolves words against a scene's instance names, categories and aliases (and optional word groups).

    Built from a simulator's :class:`WorldState` (:meth:`from_world_state`), from plain ``(name, category,
    aliases)`` rows (:meth:`from_entities`, what an episode record stores), or from EMMOE's own name map
    (:meth:`from_emmoe_name_dict`, used to reproduce appendix C's example). A plain dictionary index is all
    this needs; the normalisation is the grounder's (:func:`normalize_name`) so that the metric and the
    executor agree on what a word means.
    """

    def __init__(
        self,
        instances: Iterable[str],
        words: Mapping[str, Iterable[str]],
        groups: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._instances = {normalize_name(n): n for n in instances}
        self._words: dict[str, frozenset[str]] = {normalize_name(w): frozenset(v) for w, v in words.items()}
        self._groups: dict[str, frozenset[str]] = {
            normalize_name(w): frozenset(v) for w, v in (groups or {}).items()
        }

    @classmethod
    def from_entities(
        cls,
        rows: Iterable[tuple[str, str, Sequence[str]]],
        groups: Mapping[str, Iterable[str]] | None = None,
    ) -> SceneNameResolver:
        """``rows``: ``(instance name, category, aliases)``. ``groups``: word -> member categories ("fruit")."""
        rows = list(rows)
        words: dict[str, set[str]] = {}
        by_category: dict[str, set[str]] = {}
        for name, category, aliases in rows:
            for word in (category, *aliases):
                if word:
                    words.setdefault(normalize_name(word), set()).add(name)
            by_category.setdefault(normalize_name(category), set()).add(name)
        group_members: dict[str, set[str]] = {}
        for group, categories in (groups or {}).items():
            members = set().union(*(by_category.get(normalize_name(c), set()) for c in categories))
            if members:
                group_members[group] = members
        return cls((r[0] for r in rows), words, group_members)

    @classmethod
    def from_world_state(
        cls, state: WorldState, groups: Mapping[str, Iterable[str]] | None = None
    ) -> SceneNameResolver:
        return cls.from_entities(((e.name, e.category, e.aliases) for e in state.entities.values()), groups)

    @classmethod
    def from_scene_spec(cls, spec: SceneSpec, groups: Mapping[str, Iterable[str]] | None = None) -> SceneNameResolver:
        """Rooms, furniture and objects of a scene spec (names do not depend on the placement seed)."""
        rows = [(e.name, e.category, tuple(e.aliases)) for e in spec.rooms]
        rows += [(e.name, e.category, tuple(e.aliases)) for e in spec.furniture]
        rows += [(e.name, e.category, tuple(e.aliases)) for e in spec.objects]
        return cls.from_entities(rows, groups)

    @classmethod
    def from_emmoe_name_dict(cls, text: str) -> SceneNameResolver:
        """EMMOE's name map: blocks of ``instance:`` followed by one line of ``/``-separated aliases."""
        rows: list[tuple[str, str, list[str]]] = []
        lines = [line.strip() for line in text.replace("\r", "").split("\n")]
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.endswith(":"):
                name = line[:-1]
                aliases_line = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].endswith(":") else ""
                aliases = [a.strip() for a in aliases_line.split("/") if a.strip()]
                rows.append((name, name, aliases))
                i += 2 if aliases_line else 1
            else:
                i += 1
        return cls.from_entities(rows)

    def resolve(self, word: str) -> frozenset[str]:
        key = normalize_name(word)
        if key in self._instances:
            return frozenset({self._instances[key]})
        if key in self._words:
            return self._words[key]
        return self._groups.get(key, frozenset())


def arguments_match(node_arg: str, step_arg: str, resolver: NameResolver) -> bool:
    node_set = resolver.resolve(node_arg)
    step_set = resolver.resolve(step_arg)
    if not node_set and not step_set:
        return normalize_name(node_arg) == normalize_name(step_arg)
    return bool(node_set & step_set)


def step_matches(node: Node, step: Node, resolver: NameResolver) -> bool:
    """Whether an executed step (already known to be successful) checks ``node``."""
    if node.action != step.action:
        return False
    if node.is_end:
        return True
    if len(node.args) != len(step.args):
        return False
    return all(arguments_match(a, b, resolver) for a, b in zip(node.args, step.args, strict=False))


# ------------------------------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class Step:
    """What TP looks at in one round: the parsed subtask (None when unparseable) and whether it succeeded."""

    node: Node | None
    success: bool


def steps_of(rounds: Sequence[RoundRecord]) -> list[Step]:
    """The rounds as TP steps. End outputs count as successful (see the module docstring). A round grounded
    through a world graph is read as grounded (``RoundRecord.grounded``): the graph's names are perception's
    own, which the scene's name table does not know."""
    steps = []
    for record in rounds:
        subtask = record.grounded or record.output.subtask
        if subtask is None:
            steps.append(Step(None, False))
            continue
        node = node_from_subtask(subtask)
        steps.append(Step(node, record.feedback.success or node.is_end))
    return steps


def matched_prefix(keypath: Sequence[Node], steps: Sequence[Step], resolver: NameResolver) -> int:
    """How many nodes of ``keypath`` the steps check in order (the length of ``k_check``)."""
    position = 0
    for step in steps:
        if position == len(keypath):
            break
        if step.success and step.node is not None and step_matches(keypath[position], step.node, resolver):
            position += 1
    return position


@dataclass(frozen=True)
class TaskProgress:
    value: Fraction  # max over keypaths, exact
    per_keypath: tuple[Fraction, ...]
    best_keypath: int  # index of the first keypath reaching ``value``

    @property
    def complete(self) -> bool:
        return self.value == 1


def task_progress(
    keypaths: Sequence[Sequence[str]] | Sequence[Sequence[Node]],
    rounds: Sequence[RoundRecord] | Sequence[Step],
    resolver: NameResolver,
) -> TaskProgress:
    """TP (eq. 1): the best ratio ``len(k_check) / len(k)`` over the task's keypaths."""
    if not keypaths:
        raise KeypathError("a task needs at least one keypath")
    parsed = [tuple(parse_node(n) if isinstance(n, str) else n for n in path) for path in keypaths]
    given = [r for r in rounds if isinstance(r, Step)]
    steps = given if len(given) == len(rounds) else steps_of([r for r in rounds if isinstance(r, RoundRecord)])
    ratios = []
    for path in parsed:
        if not path:
            raise KeypathError("a keypath needs at least one node")
        ratios.append(Fraction(matched_prefix(path, steps, resolver), len(path)))
    best = max(ratios)
    return TaskProgress(best, tuple(ratios), ratios.index(best))

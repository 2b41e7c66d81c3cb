"""A sampling-based motion planner in an arm's joint space: RRT-Connect, then shortcutting.

The manipulation skills move the arm along straight joint-space segments and test each with one collision check
(the arm's link points against the world graph's boxes, :mod:`.manipulation`). When the straight motion (and the one
through the tuck) collides, :func:`plan_motion` searches the joint space with RRT-Connect (Kuffner and LaValle,
"RRT-Connect: An Efficient Approach to Single-Query Path Planning", ICRA 2000): two trees, one from the start and
one from the goal, each grown a step towards a random configuration and the other pulled towards it until they meet.
The path is then shortened by random shortcutting (Geraerts and Overmars, "Creating High-quality Paths for Motion
Planning", IJRR 2007): two points of the path are joined directly wherever that segment is clear, and points the
motion passes straight through are dropped. The waypoints go to the arm as one FollowJointTrajectory goal.

Every segment, in the search and in the shortcuts, is tested by :func:`segment_clear` with the caller's
configuration check at the same spacing as the straight motions (so the planner never accepts a motion the skills'
own check would refuse). The search is bounded by a number of samples and a wall-clock budget and draws from a
generator seeded by the caller: the same seed gives the same path unless the clock, not the samples, ends the
search.

Why written here rather than taken from a library: nothing installed fits. mink's ``CollisionAvoidanceLimit`` is a
velocity constraint of the IK's QP (a local method: it slows the arm near MuJoCo geoms but cannot find a way
around an obstacle between start and goal, and it tests geoms, not the world graph's boxes). OMPL publishes Python
wheels on PyPI (``ompl`` 2.0.1, cp311 manylinux2014 x86_64, 4.6 MB, 17 MB installed, BSD-3-Clause; checked with
``pip download --no-deps``) and would be the choice for more planners (RRT*, BIT*) or constrained motion, but it is
a new dependency (locks and a clean-clone CI run), and with the validity check a Python callback its speed is
mostly ours; RRT-Connect and shortcutting are a page.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

#: Largest joint step (rad; m for a prismatic joint) between the configurations a segment's check tests.
CHECK_STEP = 0.1

#: How many of a segment's configurations segment_clear gives a check that tests several at once (``many``).
SEGMENT_BATCH = 8

Check = Callable[[tuple[float, ...]], bool]


@dataclass(frozen=True)
class PlannerSettings:
    """Bounds and steps of :func:`plan_motion`.

    ``step`` is the longest edge a tree grows at once, in the weighted joint distance (``weights`` of
    :func:`plan_motion`); the search stops after ``max_samples`` random configurations or ``time_budget`` seconds,
    whichever comes first, and the path is shortened by ``shortcut_attempts`` random shortcuts.
    """

    # 1-4 ms of CPU per sample on the embedded robot's arm (BENCHMARKS.md): the samples end a search long before the
    # seconds do, unless the machine is busy several times over.
    time_budget: float = 3.0  # s
    max_samples: int = 400
    step: float = 0.6
    shortcut_attempts: int = 60
    seed: int = 0

    def __post_init__(self) -> None:
        if self.time_budget <= 0 or self.max_samples < 1 or self.step <= 0 or self.shortcut_attempts < 0:
            raise ValueError(f"planner settings out of range: {self}")


@dataclass(frozen=True)
class MotionPlan:
    """The planner's answer: ``waypoints`` after the start (the last is the goal), or None with ``failure`` saying
    why; ``samples`` drawn and ``seconds`` spent (search and shortcutting)."""

    waypoints: tuple[tuple[float, ...], ...] | None
    failure: str
    samples: int
    seconds: float

    @property
    def found(self) -> bool:
        return self.waypoints is not None


def segment_clear(a: ArrayLike, b: ArrayLike, clear: Check, step: float = CHECK_STEP) -> bool:
    """Whether ``clear`` holds at every configuration at most ``step`` apart (per joint) from ``a`` to ``b``, ``b``
    included and ``a`` not: the start is where the arm is, and a contact there is not the motion's."""
    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    steps = max(1, math.ceil(float(np.max(np.abs(b_ - a_))) / step))
    many = getattr(clear, "many", None)
    if many is None:
        return all(clear(tuple(float(v) for v in a_ + (b_ - a_) * k / steps)) for k in range(1, steps + 1))
    # A check that tests several configurations at once (manipulation's): the same configurations, the far end first,
    # then the others SEGMENT_BATCH at a time from the start, stopping at the first that collides. The order does not
    # change the answer; a motion that collides mostly does so at its far end (in a search among a cabinet's edges,
    # emmoe-032, 97 % of the refused segments did), which one configuration's check then finds.
    qs = a_ + (b_ - a_) * np.arange(1, steps + 1)[:, None] / steps
    if not many(qs[-1:]):
        return False
    return all(many(qs[k:min(k + SEGMENT_BATCH, steps - 1)]) for k in range(0, steps - 1, SEGMENT_BATCH))


class _Tree:
    """Configurations and each one's parent (index), nearest-neighbour search by weighted distance."""

    def __init__(self, root: np.ndarray, weights: np.ndarray) -> None:
        self.nodes = [root]
        self.parents = [-1]
        self._weights = weights
        # The nodes as rows of a buffer that doubles when full (a copy of the whole tree per node added cost a
        # search of thousands of samples time quadratic in its size).
        self._array: np.ndarray = np.empty((16, len(root)))
        self._array[0] = root

    def nearest(self, q: np.ndarray) -> int:
        return int(np.argmin(np.linalg.norm((self._array[: len(self.nodes)] - q) * self._weights, axis=1)))

    def add(self, q: np.ndarray, parent: int) -> int:
        if len(self.nodes) == len(self._array):
            self._array = np.vstack([self._array, np.empty_like(self._array)])
        self._array[len(self.nodes)] = q
        self.nodes.append(q)
        self.parents.append(parent)
        return len(self.nodes) - 1

    def branch(self, index: int) -> list[np.ndarray]:
        """The configurations from the root to ``index``."""
        out = []
        while index >= 0:
            out.append(self.nodes[index])
            index = self.parents[index]
        return out[::-1]


def plan_motion(start: ArrayLike, goal: ArrayLike, clear: Check, lower: ArrayLike, upper: ArrayLike,
                weights: ArrayLike | None = None, settings: PlannerSettings | None = None,
                check_step: float = CHECK_STEP) -> MotionPlan:
    """A collision-free joint-space path from ``start`` to ``goal`` (module docstring).

    Args:
        start: where the arm is (not checked: it may touch something already).
        goal: where it must end; a goal that ``clear`` refuses fails at once.
        clear: the configuration check (True: the arm there keeps clear of everything).
        lower, upper: the joints' limits, the box the samples are drawn from.
        weights: per joint, what a unit of it counts in the distance (a prismatic joint's metres weigh more than a
            revolute joint's radians); ones by default.
        settings: the budget, steps and seed.
        check_step: the spacing of the checks along a segment (:func:`segment_clear`).
    """
    settings = settings or PlannerSettings()
    started = time.perf_counter()
    q_start, q_goal = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    w = np.ones_like(q_start) if weights is None else np.asarray(weights, dtype=float)
    if not (q_start.shape == q_goal.shape == lo.shape == hi.shape == w.shape):
        raise ValueError("start, goal, limits and weights need one value per joint")

    def elapsed() -> float:
        return time.perf_counter() - started

    def edge(a: np.ndarray, b: np.ndarray) -> bool:
        return segment_clear(a, b, clear, check_step)

    if not clear(tuple(float(v) for v in q_goal)):
        return MotionPlan(None, "the goal configuration itself collides", 0, elapsed())
    if edge(q_start, q_goal):
        return MotionPlan((tuple(float(v) for v in q_goal),), "", 0, elapsed())
    rng = np.random.default_rng(settings.seed)
    trees = (_Tree(q_start, w), _Tree(q_goal, w))

    def towards(tree: _Tree, target: np.ndarray) -> tuple[int, bool]:
        """Grow ``tree`` one step from its nearest node towards ``target``: the new node's index (-1 when the step
        collides) and whether it reached ``target``."""
        near = tree.nearest(target)
        origin = tree.nodes[near]
        gap = float(np.linalg.norm((target - origin) * w))
        reached = gap <= settings.step
        new = target if reached else origin + (target - origin) * (settings.step / gap)
        if not edge(origin, new):
            return -1, False
        return tree.add(new, near), reached

    samples = 0
    grow, other = trees
    while samples < settings.max_samples and elapsed() < settings.time_budget:
        samples += 1
        sample = rng.uniform(lo, hi)
        added, _ = towards(grow, sample)
        if added >= 0:
            target = grow.nodes[added]
            while True:  # connect: pull the other tree towards the new node until it gets there or is stopped
                joined, reached = towards(other, target)
                if joined < 0:
                    break
                if reached:
                    first, second = (grow, other) if grow is trees[0] else (other, grow)
                    first_end, second_end = (added, joined) if grow is trees[0] else (joined, added)
                    path = first.branch(first_end) + second.branch(second_end)[::-1][1:]
                    path = _shortcut(path, edge, rng, settings.shortcut_attempts)
                    return MotionPlan(tuple(tuple(float(v) for v in q) for q in path[1:]), "", samples, elapsed())
        grow, other = other, grow
    limit = "samples" if samples >= settings.max_samples else "seconds"
    return MotionPlan(None, f"no collision-free motion found within {samples} samples and {elapsed():.1f} s "
                            f"(budget: {settings.max_samples} samples, {settings.time_budget:.1f} s; ran out of {limit})",
                      samples, elapsed())


def _shortcut(path: list[np.ndarray], edge: Callable[[np.ndarray, np.ndarray], bool], rng: np.random.Generator,
              attempts: int) -> list[np.ndarray]:
    """Shorter: ``attempts`` random pairs of points joined straight where the segment is clear (the points between
    dropped), then every point the path can skip."""
    path = list(path)
    for _ in range(attempts):
        if len(path) <= 2:
            break
        i, j = sorted(int(k) for k in rng.choice(len(path), size=2, replace=False))
        if j - i > 1 and edge(path[i], path[j]):
            path = path[: i + 1] + path[j:]
    # Greedy pass: from each kept point, straight to the farthest one it reaches.
    kept, i = [path[0]], 0
    while i < len(path) - 1:
        j = len(path) - 1
        while j > i + 1 and not edge(path[i], path[j]):
            j -= 1
        kept.append(path[j])
        i = j
    return kept

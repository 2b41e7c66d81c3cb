"""The floor baseline: a planner that picks a random valid subtask among what it can see.

What "visible" means here (a decision; tested in ``tests/eval/test_random_planner.py``): a scene instance is
visible when at least ``min_pixels`` pixels of the four first-person views' instance segmentation belong to
it. That is exactly what a perfect open-vocabulary detector would report from the images the planner
receives, and no more: no memory of earlier rounds, no map, no goal. The views come from
``request.observation`` (an :class:`~homiebot.types.Observation`): the planner declares ``needs_views``, so
both wirings fetch the views with their segmentation for it (:func:`homiebot.agent.loop.reads_observation`).

What "valid" means: a subtask that the system prompt's rules allow, so the baseline is not failing on
format alone:

* the action comes from the request's action list; the target (and the place of a Put) is a visible
  instance, written by its instance name (which the executor grounds exactly);
* the one-hand rule of the prompt, read from the inventory the planner is told: with an empty hand it may
  Go to, Pick, Open or Close; holding something it may Go to or Put the held object somewhere;
* kind sense a detector would give: Pick targets small objects; Open, Close and Put places are furniture;
  Go to takes any room, furniture or object. Kinds come from the scene spec in ``request.scene``; without
  it every visible name is a candidate for every role. Whether a furniture opens, or is near enough, is *not*
  known to the planner; those mistakes (L4, D1, ...) are its to make;
* ``[End]`` is always one of the candidates.

It then draws one candidate uniformly (every concrete subtask equally likely, so End is rare when much is
visible), with a :class:`random.Random` seeded from the episode seed and the task text, so an episode is
reproducible whatever ran before it in the same process. The model follows EMMOE table E2 (NoMaD for rooms
and furniture, PixNav for objects, RT-1-X for Pick/Put, octo for Open/Close).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.prompt import format_output
from homiebot.sim.scene import SceneSpec
from homiebot.types import Action, Observation, Subtask

_MODEL_FOR = {Action.PICK: "RT-1-X", Action.PUT: "RT-1-X", Action.OPEN: "octo", Action.CLOSE: "octo"}


def visible_instances(observation: Observation, min_pixels: int = 1) -> list[str]:
    """Instance names with at least ``min_pixels`` pixels in any of the four views' segmentation, sorted."""
    return observation.visible_instances(min_pixels)


def _kinds_from_scene(scene: SceneSpec | None) -> dict[str, str]:
    if scene is None:
        return {}
    kinds = {r.name: "room" for r in scene.rooms}
    kinds.update({f.name: "furniture" for f in scene.furniture})
    kinds.update({o.name: "object" for o in scene.objects})
    return kinds


def candidate_subtasks(
    visible: Iterable[str],
    inventory: Sequence[str],
    kinds: Mapping[str, str],
    actions: Sequence[str],
) -> list[Subtask]:
    """Every valid subtask for this round (see the module docstring), in a stable order, End last."""
    allowed = {a for a in (Action.parse(x) for x in actions) if a is not None} or set(Action)
    names = sorted(set(visible))
    # A name of unknown kind (no scene spec given) may be either: it is a candidate for both roles.
    objects = [n for n in names if kinds.get(n, "object") == "object"]
    furniture = [n for n in names if kinds.get(n, "furniture") == "furniture"]
    out: list[Subtask] = []
    if Action.GO_TO in allowed:
        out += [Subtask(Action.GO_TO.value, n) for n in names]
    if inventory:
        if Action.PUT in allowed:
            out += [Subtask(Action.PUT.value, inventory[0], place) for place in furniture]
    else:
        if Action.PICK in allowed:
            out += [Subtask(Action.PICK.value, n) for n in objects]
        for action in (Action.OPEN, Action.CLOSE):
            if action in allowed:
                out += [Subtask(action.value, n) for n in furniture]
    out.append(Subtask(Action.END.value))
    return out


class RandomPlanner(Planner):
    """Uniformly random valid subtask among the visible instances (the floor of every table)."""

    name = "random"
    privileged = False
    accepts_free_text = True
    #: It reads the views' segmentation (request.observation), so the wirings fetch it.
    needs_views = True

    def __init__(self, seed: int = 0, min_pixels: int = 20) -> None:
        if min_pixels < 1:
            raise ValueError(f"min_pixels must be >= 1, got {min_pixels}")
        self.base_seed = seed
        self.min_pixels = min_pixels
        self._rng = random.Random(seed)

    def reset(self, task: str, seed: int = 0) -> None:
        # Seeded from (planner seed, episode seed, task text) through a stable hash, not Python's salted hash().
        digest = hashlib.sha256(f"{self.base_seed}|{seed}|{task}".encode()).digest()
        self._rng = random.Random(int.from_bytes(digest[:8], "little"))

    def _visible(self, request: PlanRequest) -> list[str]:
        if request.observation is None:
            raise ValueError("the random planner needs the views' segmentation (request.observation)")
        return visible_instances(request.observation, self.min_pixels)

    def plan(self, request: PlanRequest) -> str:
        kinds = _kinds_from_scene(request.scene)
        visible = self._visible(request)
        candidates = candidate_subtasks(visible, request.inventory, kinds, request.actions)
        choice = candidates[self._rng.randrange(len(candidates))]
        action = Action.parse(choice.action)
        if action is Action.END:
            return format_output(f"I pick a random subtask among {len(candidates)} valid ones: End.", choice, "")
        if action is Action.GO_TO:
            model = "PixNav" if kinds.get(choice.target or "") == "object" else "NoMaD"
        else:
            model = _MODEL_FOR[action]  # type: ignore[index]
        if request.models and model not in request.models:
            model = request.models[0]  # a deployment with other low-level models (oracle, M3)
        analysis = f"I pick a random subtask among {len(candidates)} valid ones for the {len(visible)} things I see."
        return format_output(analysis, choice, model)

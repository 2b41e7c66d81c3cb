"""A PARTNR-style task suite for the seven apartments, generated from templates and verified in the loop.

PARTNR (section 3.1-3.2, appendix A.4) generates instructions with an LLM from each house's contents, then
keeps a task only when the simulator can instantiate it and humans or planners can solve it. Here the
instructions come from templates over each scene's contents (our wording, in PARTNR's four categories),
and verification replaces the human pass (docs/partnr.md, "The suite"):

* no terminal proposition holds in the initial state (PARTNR's "Already Satisfied" failure);
* the noiseless PARTNR expert reaches PC = 1 within the round limit;
* the instruction names only entities of the scene (every mention is recorded with the task).

Categories are computed from the evaluation function (:func:`~homiebot.tasks.partnr.language.task_labels`),
never assigned by the template. The split is by scene, as PARTNR's: apartments 1-5 train, 6 validation,
7 test. After those tasks come the water tasks (PARTNR's is_filled, done with the human's Fill and Pour): fill a
container and place it, fill one while an object is moved, or carry water in one container into another that is
then moved; they are drafted in a pass of their own (``WATER_TEMPLATES``), so the other tasks keep their ids.
Usage::

    python -m homiebot.eval.partnr.generate --out homiebot/tasks/suites/partnr.yaml
"""

from __future__ import annotations

import argparse
import itertools
import logging
import random
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from homiebot.config import MAX_ROUNDS
from homiebot.tasks.partnr.language import (
    EvaluationFunction,
    EvaluationProposition,
    EvaluationPropositionDependency,
    TemporalConstraint,
    TerminalSatisfactionConstraint,
    task_category,
    validate,
)
from homiebot.tasks.partnr.tracker import evaluate_states
from homiebot.types import EntityKind, WorldState

log = logging.getLogger(__name__)

SCENES: tuple[str, ...] = tuple(f"apartment_{i}" for i in range(1, 8))
SPLITS: dict[str, str] = {**{f"apartment_{i}": "train" for i in range(1, 6)}, "apartment_6": "validation",
                          "apartment_7": "test"}
#: Candidates drawn per template and scene; verification drops some, the rest are kept.
PER_TEMPLATE = 8
SEED_BASE = 7000
#: Appliances a task may switch (the fridge keeps running: switching it off is no household chore).
SWITCHABLE = ("tv", "floor_lamp", "microwave", "oven")
#: Water tasks (PARTNR's is_filled with its Fill and Pour skills, appendix A.9.1) are drafted in a pass of their
#: own after the others, with their own ids (``partnr-<scene>-wNN``), seeds and random stream: adding their
#: templates to TEMPLATES would reorder the round-robin and renumber, reseed and replan every earlier task.
WATER_PER_TEMPLATE = 2
WATER_SEED_BASE = 9000


@dataclass(frozen=True)
class SceneContents:
    """What a template may name in one scene, read from the state after the reset."""

    scene: str
    surfaces: tuple[str, ...]  # non-articulated furniture with a surface
    containers: tuple[str, ...]  # interactive articulated furniture with an interior
    objects: dict[str, str]  # object -> the receptacle it starts on/in
    categories: dict[str, str]  # object -> category
    switch_on: tuple[str, ...]  # appliances that start off
    switch_off: tuple[str, ...]  # appliances that start on
    cleaners: tuple[str, ...]  # furniture that cleans what is held at it
    dirty: tuple[str, ...]  # objects that start not clean
    fillable: tuple[str, ...] = ()  # objects that hold water (the simulator's is_filled is not None)


def scene_contents(state: WorldState, scene_spec: Any) -> SceneContents:
    furniture = {f.name: f for f in scene_spec.furniture}
    surfaces = tuple(sorted(n for n, f in furniture.items() if f.surfaces and f.articulation is None))
    containers = tuple(sorted(n for n, f in furniture.items()
                              if f.articulation is not None and f.interior is not None and f.interactive))
    objects = {n: e.parent for n, e in state.entities.items() if e.kind is EntityKind.OBJECT and e.parent is not None}
    categories = {n: state.entities[n].category for n in objects}
    switchable = [n for n in furniture if state.entities[n].category in SWITCHABLE and state.entities[n].appliance]
    return SceneContents(
        scene=state.scene,
        surfaces=surfaces,
        containers=containers,
        objects=objects,
        categories=categories,
        switch_on=tuple(sorted(n for n in switchable if state.entities[n].powered_on is False)),
        switch_off=tuple(sorted(n for n in switchable if state.entities[n].powered_on is True)),
        cleaners=tuple(sorted(n for n, e in state.entities.items() if "clean" in e.functions)),
        dirty=tuple(sorted(n for n in objects if state.entities[n].is_clean is False)),
        fillable=tuple(sorted(n for n in objects if state.entities[n].is_filled is not None)),
    )


def say(name: str) -> str:
    """How an instruction names an instance: its words, without an instance number."""
    words = name.split("_")
    if len(words) > 1 and words[-1].isdigit():
        words = words[:-1]
    return " ".join(words)


def plural(words: str) -> str:
    """English plural of a noun phrase's last word (boxes, peaches, strawberries, apples)."""
    if words.endswith(("s", "x", "ch", "sh")):
        return words + "es"
    if words.endswith("y") and words[-2:-1] not in "aeiou":
        return words[:-1] + "ies"
    return words + "s"


@dataclass
class Draft:
    """A task before verification."""

    instruction: str
    propositions: list[EvaluationProposition]
    mentions: list[str]  # scene entities the instruction names
    groups: list[list[int]] = field(default_factory=list)  # temporal groups (PARTNR's proposition_order)
    dependencies: list[EvaluationPropositionDependency] = field(default_factory=list)
    not_terminal: set[int] = field(default_factory=set)
    goal: list[dict[str, Any]] = field(default_factory=list)  # the final-state twin (EMMOE GoalSpec)
    template: str = ""

    def function(self) -> EvaluationFunction:
        n = len(self.propositions)
        temporal = TemporalConstraint.from_groups(self.groups, n) if self.groups else TemporalConstraint((), n)
        terminal = TerminalSatisfactionConstraint(tuple(i for i in range(n) if i not in self.not_terminal), n)
        return EvaluationFunction(tuple(self.propositions), tuple(self.dependencies), (temporal, terminal))


def _on(obj: str, furniture: str, contents: SceneContents) -> tuple[EvaluationProposition, dict[str, Any], str]:
    """A placement proposition, its goal twin, and the preposition for the instruction."""
    inside = furniture in contents.containers
    prop = EvaluationProposition("is_inside" if inside else "is_on_top",
                                 {"object_handles": [obj], "receptacle_handles": [furniture]})
    goal = {"type": "placed", "object": obj, "relation": "in" if inside else "on", "receptacle": furniture}
    return prop, goal, "in" if inside else "on"


def _destinations(contents: SceneContents, obj: str, rng: random.Random, containers: bool = True) -> list[str]:
    places = [f for f in contents.surfaces if f != contents.objects[obj]]
    if containers:
        places += [c for c in contents.containers if c != contents.objects[obj]]
    rng.shuffle(places)
    return places


def _reachable_objects(contents: SceneContents) -> list[str]:
    """Objects on surfaces or in containers the robot can open (not in a sink basin it cannot reach into)."""
    return sorted(o for o, p in contents.objects.items() if p in contents.surfaces or p in contents.containers)


def _movable(contents: SceneContents) -> list[str]:
    """Reachable objects an instruction can name unambiguously ("the apple" when the scene has one apple);
    several instances of a kind are named only as "one of the apples" (an OR-list)."""
    words = Counter(say(o) for o in contents.objects)
    return [o for o in _reachable_objects(contents) if words[say(o)] == 1]


# ------------------------------------------------------------------------------------------------ templates


def _move_one(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    for obj in rng.sample(_movable(c), min(PER_TEMPLATE, len(_movable(c)))):
        dest = _destinations(c, obj, rng)[0]
        prop, goal, prep = _on(obj, dest, c)
        verb = rng.choice(["Move", "Put", "Take"])
        if verb != "Put":
            prep = "into" if prep == "in" else "to"
        yield Draft(f"{verb} the {say(obj)} {prep} the {say(dest)}.", [prop], [obj, dest], goal=[goal],
                    template="move one")


def _move_two(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    movable = _movable(c)
    for _ in range(PER_TEMPLATE):
        a, b = rng.sample(movable, 2)
        if say(a) == say(b):
            continue
        dest = next(f for f in _destinations(c, a, rng, containers=False) if f != c.objects[b])
        (pa, ga, _), (pb, gb, _) = _on(a, dest, c), _on(b, dest, c)
        yield Draft(f"Bring the {say(a)} and the {say(b)} to the {say(dest)}.", [pa, pb], [a, b, dest],
                    goal=[ga, gb], template="move two")


def _any_of_kind(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    """PARTNR's resolvable ambiguity: any instance of a kind (an OR-list)."""
    kinds: dict[str, list[str]] = {}
    for o in _reachable_objects(c):
        kinds.setdefault(say(o), []).append(o)
    several = sorted(k for k, v in kinds.items() if len(v) > 1)
    for kind in rng.sample(several, min(PER_TEMPLATE, len(several))):
        instances = kinds[kind]
        dest = next(f for f in _destinations(c, instances[0], rng, containers=False)
                    if all(c.objects[o] != f for o in instances))
        prop = EvaluationProposition("is_on_top", {"object_handles": instances, "receptacle_handles": [dest]})
        goal = {"type": "placed", "category": c.categories[instances[0]], "relation": "on", "receptacle": dest}
        yield Draft(f"Put one of the {plural(kind)} on the {say(dest)}.", [prop], [*instances, dest], goal=[goal],
                    template="any of a kind")


def _next_to_pair(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    movable = _movable(c)
    for _ in range(PER_TEMPLATE):
        a, b = rng.sample(movable, 2)
        if say(a) == say(b):
            continue
        dest = next(f for f in _destinations(c, a, rng, containers=False) if f != c.objects[b])
        (pa, ga, _), (pb, gb, _) = _on(a, dest, c), _on(b, dest, c)
        near = EvaluationProposition("is_next_to", {"entity_handles_a": [a], "entity_handles_b": [b]})
        # PARTNR's automatic dependency: next-to is checked while its objects' placements hold.
        dep = EvaluationPropositionDependency((2,), (0, 1), "while_satisfied", "any")
        yield Draft(f"Move the {say(a)} and the {say(b)} to the {say(dest)}; place them next to each other.",
                    [pa, pb, near], [a, b, dest], dependencies=[dep], goal=[ga, gb], template="next to each other")


def _next_to_resident(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    """Put an object next to one that already stands on a surface."""
    movable = _movable(c)
    residents = [o for o in movable if c.objects[o] in c.surfaces]
    for _ in range(PER_TEMPLATE):
        ref = rng.choice(residents)
        options = [o for o in movable if c.objects[o] != c.objects[ref] and say(o) != say(ref)]
        if not options:
            continue
        obj = rng.choice(options)
        dest = c.objects[ref]
        prop, goal, _ = _on(obj, dest, c)
        near = EvaluationProposition("is_next_to", {"entity_handles_a": [obj], "entity_handles_b": [ref]})
        dep = EvaluationPropositionDependency((1,), (0,), "while_satisfied", "any")
        yield Draft(f"Place the {say(obj)} next to the {say(ref)} on the {say(dest)}.", [prop, near],
                    [obj, ref, dest], dependencies=[dep], goal=[goal], template="next to a resident")


def _first_then(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    movable = _movable(c)
    for _ in range(PER_TEMPLATE):
        a, b = rng.sample(movable, 2)
        if say(a) == say(b):
            continue
        da, db = _destinations(c, a, rng)[0], _destinations(c, b, rng)[0]
        (pa, ga, prep_a), (pb, gb, prep_b) = _on(a, da, c), _on(b, db, c)
        yield Draft(f"First put the {say(a)} {prep_a} the {say(da)}, then put the {say(b)} {prep_b} the {say(db)}.",
                    [pa, pb], [a, da, b, db], groups=[[0], [1]], goal=[ga, gb], template="first then")


def _there_and_back(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    """PARTNR's multi-step rearrangement: the first placement is meant to be undone."""
    on_surfaces = [o for o in _movable(c) if c.objects[o] in c.surfaces]
    for obj in rng.sample(on_surfaces, min(PER_TEMPLATE, len(on_surfaces))):
        home = c.objects[obj]
        away = _destinations(c, obj, rng, containers=False)[0]
        (p_away, _, _), (p_home, g_home, _) = _on(obj, away, c), _on(obj, home, c)
        dep = EvaluationPropositionDependency((1,), (0,), "after_satisfied", "any")
        yield Draft(f"Move the {say(obj)} to the {say(away)}, then bring it back to the {say(home)}.",
                    [p_away, p_home], [obj, away, home], groups=[[0], [1]], dependencies=[dep], not_terminal={0},
                    goal=[g_home], template="there and back")


def _switch_and_move(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    switches = [(a, True) for a in c.switch_on] + [(a, False) for a in c.switch_off]
    movable = _movable(c)
    for _ in range(PER_TEMPLATE):
        if not switches:
            return
        appliance, on = rng.choice(switches)
        obj = rng.choice(movable)
        dest = _destinations(c, obj, rng)[0]
        prop, goal, prep = _on(obj, dest, c)
        power = EvaluationProposition("is_powered_on" if on else "is_powered_off", {"object_handles": [appliance]})
        word = "on" if on else "off"
        goals = [goal] + ([] if on else [{"type": "powered_off", "furniture": appliance}])
        if rng.random() < 0.5:
            yield Draft(f"Turn {word} the {say(appliance)} and put the {say(obj)} {prep} the {say(dest)}.",
                        [power, prop], [appliance, obj, dest], goal=goals, template="switch and move")
        else:
            yield Draft(f"Put the {say(obj)} {prep} the {say(dest)}, then turn {word} the {say(appliance)}.",
                        [prop, power], [obj, dest, appliance], groups=[[0], [1]], goal=goals,
                        template="move then switch")


def _clean_and_place(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    if not c.cleaners:
        return
    dirty = [o for o in _movable(c) if o in c.dirty]
    for obj in rng.sample(dirty, min(PER_TEMPLATE, len(dirty))):
        dest = _destinations(c, obj, rng, containers=False)[0]
        prop, goal, prep = _on(obj, dest, c)
        clean = EvaluationProposition("is_clean", {"object_handles": [obj]})
        yield Draft(f"Clean the {say(obj)}, then put it {prep} the {say(dest)}.", [clean, prop],
                    [obj, dest], groups=[[0], [1]], goal=[goal], template="clean then place")


TEMPLATES = (_move_one, _move_two, _any_of_kind, _next_to_pair, _next_to_resident, _first_then,
             _there_and_back, _switch_and_move, _clean_and_place)


# ------------------------------------------------------------------------------------------- water templates


def _named_containers(c: SceneContents) -> dict[str, tuple[str, list[str]]]:
    """Reachable containers an instruction can name, with the words that name them and the entities those words
    mention: "mug" when the scene has one mug; "bowl on the tv stand" when it has several bowls but one on the TV
    stand (PARTNR's instructions tell instances apart by where they are)."""
    words = Counter(say(o) for o in c.objects)
    named: dict[str, tuple[str, list[str]]] = {}
    for obj in _reachable_objects(c):
        if obj not in c.fillable:
            continue
        if words[say(obj)] == 1:
            named[obj] = (say(obj), [obj])
            continue
        home = c.objects[obj]
        if sum(1 for o, p in c.objects.items() if p == home and say(o) == say(obj)) == 1:
            where = "in" if home in c.containers else "on"
            named[obj] = (f"{say(obj)} {where} the {say(home)}", [obj, home])
    return named


def _filled(obj: str) -> EvaluationProposition:
    return EvaluationProposition("is_filled", {"object_handles": [obj]})


def _fill_then_place(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    named = _named_containers(c)
    for obj in rng.sample(sorted(named), min(WATER_PER_TEMPLATE, len(named))):
        words, mentions = named[obj]
        dest = _destinations(c, obj, rng, containers=False)[0]
        prop, goal, prep = _on(obj, dest, c)
        yield Draft(f"Fill the {words} with water, then put it {prep} the {say(dest)}.", [_filled(obj), prop],
                    [*mentions, dest], groups=[[0], [1]], goal=[goal], template="fill then place")


def _fill_and_move(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    named = _named_containers(c)
    others = [o for o in _movable(c) if o not in c.fillable]
    for obj in rng.sample(sorted(named), min(WATER_PER_TEMPLATE, len(named))):
        if not others:
            return
        words, mentions = named[obj]
        other = rng.choice(others)
        dest = _destinations(c, other, rng)[0]
        prop, goal, prep = _on(other, dest, c)
        yield Draft(f"Fill the {words} with water and put the {say(other)} {prep} the {say(dest)}.",
                    [_filled(obj), prop], [*mentions, other, dest], goal=[goal], template="fill and move")


def _pour_then_place(c: SceneContents, rng: random.Random) -> Iterator[Draft]:
    """Water carried in one container into another, which is then moved: the first container's water is a
    step, not the end state (it is empty again after the pour), so that proposition is not terminal."""
    named = _named_containers(c)
    pairs = [(a, b) for a in sorted(named) for b in sorted(named) if say(a) != say(b)]
    for a, b in rng.sample(pairs, min(WATER_PER_TEMPLATE, len(pairs))):
        (words_a, mentions_a), (words_b, mentions_b) = named[a], named[b]
        dest = _destinations(c, b, rng, containers=False)[0]
        prop, goal, prep = _on(b, dest, c)
        yield Draft(f"Fill the {words_a} with water, pour it into the {words_b}, then put the {say(b)} {prep} the "
                    f"{say(dest)}.", [_filled(a), _filled(b), prop], [*mentions_a, *mentions_b, dest],
                    groups=[[0], [1], [2]], not_terminal={0}, goal=[goal], template="pour then place")


WATER_TEMPLATES = (_fill_then_place, _fill_and_move, _pour_then_place)


# ------------------------------------------------------------------------------------------------ verification


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""
    plan: tuple[str, ...] = ()
    rounds: int = 0


def verify(sim: Any, draft: Draft, scene: str, seed: int, task_id: str) -> Verdict:
    """Instantiate the task and run the noiseless PARTNR expert on it (PARTNR's human pass, replaced)."""
    from homiebot.agent.build import build_episode
    from homiebot.config.planners import PartnrExpertPlannerConfig
    from homiebot.config.run import RunConfig, SimulatorConfig
    from homiebot.planner.partnr_expert import PartnrExpertPlanner
    from homiebot.tasks.suite import TaskSpec

    function = draft.function()
    sim.reset(scene, seed=seed)
    initial = sim.state()
    validate(function, task_id, initial.entities)
    missing = [m for m in draft.mentions if m not in initial.entities]
    if missing:
        return Verdict(False, f"names {missing} not in the scene")
    start = evaluate_states(function, [initial])
    early = [i for i in function.terminal_indices() if start.satisfied_at[i] == 0]
    if early:
        return Verdict(False, f"already satisfied at the start: {[function.propositions[i].text() for i in early]}")
    task = TaskSpec(id=task_id, instruction=draft.instruction, scene=scene, seed=seed, attributes=["long-horizon"],
                    keypaths=[["[End]"]], goal={"all": draft.goal}, evaluation=function.to_json())
    planner = PartnrExpertPlanner()  # kept: its seen states are the episode's
    # A task with its own evaluation function gets the household actions (homiebot.tasks.suite.task_actions).
    config = RunConfig(task=task_id, max_rounds=MAX_ROUNDS, planner=PartnrExpertPlannerConfig(),
                       simulator=SimulatorConfig(render=False))
    trajectory = build_episode(config, task=task, simulator=sim, planner=planner).run()
    result = evaluate_states(function, [*planner.seen_states, sim.state()])
    plan = tuple(r.subtask_text for r in trajectory.rounds)
    if trajectory.error or not trajectory.ended or not result.success:
        return Verdict(False, f"expert PC {result.percent_complete:.2f} ended={trajectory.ended} "
                              f"{trajectory.error or ''} {result.explanation!r}", plan, len(plan))
    return Verdict(True, "", plan, len(plan))


def _verified(sim: Any, draft: Draft, scene: str, task_id: str, seed: int) -> dict[str, Any] | None:
    """The suite entry of a draft the expert solves, or None (logged) when verification rejects it."""
    verdict = verify(sim, draft, scene, seed, task_id)
    if not verdict.ok:
        log.info("%s rejected (%s): %s", task_id, draft.instruction, verdict.reason)
        return None
    category = task_category(draft.function())
    return {
        "id": task_id,
        "instruction": draft.instruction,
        "scene": scene,
        "seed": seed,
        "attributes": ["short-horizon" if verdict.rounds <= 6 else "long-horizon"],
        "split": SPLITS[scene],
        "keypaths": [[*verdict.plan]],
        "goal": {"all": draft.goal},
        "encoding": f"template '{draft.template}'; category {category}; mentions {', '.join(draft.mentions)}",
        "evaluation": draft.function().to_json(),
    }


def generate(scenes: Sequence[str] = SCENES, per_scene: int = 52,
             water: bool = True) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Draft, verify and keep up to ``per_scene`` tasks per scene, balanced over the four categories, then (with
    ``water``) the scene's verified water tasks."""
    from homiebot.sim.mujoco.backend import MujocoSimulator

    sim = MujocoSimulator(render=False)
    tasks: list[dict[str, Any]] = []
    water_tasks: list[dict[str, Any]] = []  # after every scene's other tasks, so that those keep their order
    rejected: Counter[str] = Counter()
    try:
        for scene_index, scene in enumerate(scenes):
            rng = random.Random(f"partnr-{scene}")
            sim.reset(scene, seed=SEED_BASE)
            contents = scene_contents(sim.state(), sim.scene_spec())
            # Round-robin over the templates, so that every template gets a share of its category's places.
            per_template = [list(template(contents, rng)) for template in TEMPLATES]
            drafts = [d for batch in itertools.zip_longest(*per_template) for d in batch if d is not None]
            kept_by_category: Counter[str] = Counter()
            cap = per_scene // 4
            seen_instructions: set[str] = set()
            for n, draft in enumerate(drafts):
                if draft.instruction in seen_instructions:
                    continue
                seen_instructions.add(draft.instruction)
                category = task_category(draft.function())
                if kept_by_category[category] >= cap:
                    continue
                task = _verified(sim, draft, scene, f"partnr-{scene_index + 1}-{n:03d}", SEED_BASE + 97 * scene_index + n)
                if task is None:
                    rejected[draft.template] += 1
                    continue
                kept_by_category[category] += 1
                tasks.append(task)
            log.info("%s: kept %s", scene, dict(kept_by_category))
            if not water:
                continue
            # The water pass: its own random stream, ids and seeds (see WATER_PER_TEMPLATE), no category cap.
            water_rng = random.Random(f"partnr-water-{scene}")
            batches = [list(template(contents, water_rng)) for template in WATER_TEMPLATES]
            water_drafts = [d for batch in itertools.zip_longest(*batches) for d in batch if d is not None]
            for n, draft in enumerate(water_drafts):
                if draft.instruction in seen_instructions:
                    continue
                seen_instructions.add(draft.instruction)
                task = _verified(sim, draft, scene, f"partnr-{scene_index + 1}-w{n:02d}",
                                 WATER_SEED_BASE + 97 * scene_index + n)
                if task is None:
                    rejected[draft.template] += 1
                    continue
                water_tasks.append(task)
    finally:
        sim.shutdown()
    return tasks + water_tasks, rejected


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate and verify the PARTNR-style suite.")
    parser.add_argument("--out", type=Path, required=True, help="suite YAML to write")
    parser.add_argument("--per-scene", type=int, default=52, help="tasks kept per scene (13 per category)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if not args.out.parent.is_dir():
        print(f"error: {args.out.parent} is not a directory", file=sys.stderr)
        return 2
    tasks, rejected = generate(per_scene=args.per_scene)
    suite = {
        "name": "partnr",
        "description": ("PARTNR-style tasks in the seven apartments: templates over each scene's contents, "
                        "then water tasks (ids partnr-<scene>-wNN); "
                        "verified with the noiseless PARTNR expert (docs/partnr.md). Generated by "
                        "`python -m homiebot.eval.partnr.generate`; do not edit by hand."),
        "tasks": tasks,
    }
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(suite, sort_keys=False, width=120, default_flow_style=None))
    tmp.replace(args.out)
    counts = Counter(t["encoding"].split("category ")[1].split(";")[0] for t in tasks)
    print(f"{len(tasks)} tasks written to {args.out}; by category {dict(counts)}; rejected {dict(rejected)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

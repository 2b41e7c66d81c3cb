"""A MuEP-style suite on our seven apartments: ALFWorld's six task types, its instruction templates and
ALFRED's goal conditions, played in the parallel text world of the embedded simulator (docs/muep.md).

* :class:`AlfredTask`: one task (type, object type, receptacle or lamp type, scene, seed, split) and
  :func:`goal_conditions`, ALFRED's per-type conditions on the simulator's state (alfworld ``env/tasks.py``:
  pick & place 1, look in light 2, clean / heat / cool 3, pick two 2);
* :func:`generate_suite`: every (type, object, receptacle) the scenes allow, filtered as MuEP filters its
  generated tasks (the room has what the type needs, the receptacle holds things, the goal does not hold at
  the start), balanced over the types and the seen / unseen scenes, each verified by the expert in the loop;
* :class:`TextExpert` (privileged, like MuEP's FF planner) and :class:`RandomTextAgent` play ALFWorld commands;
  :func:`run_text_episode` plays one task under MuEP's protocol (30 steps, AA / ABAB early stop) and returns a
  :class:`~homiebot.eval.muep.MuepEpisode`;
* :class:`Observe`: what the agent is given after each step, as MuEP compares its planners (section 4.2): the
  text observation only, the four rendered views only, or both (:class:`MuepObservation`).
"""

from __future__ import annotations

import enum
import logging
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import yaml

from homiebot.eval.muep import MuepEpisode, RepetitionStop
from homiebot.files import load_yaml
from homiebot.sim.base import Simulator
from homiebot.sim.scene import SceneError
from homiebot.tasks.alfred import GOAL_CONDITIONS, TASK_TYPES
from homiebot.tasks.suite import MUEP_SUITE_FILE
from homiebot.textworld.names import alfred_type
from homiebot.textworld.world import AT_DISTANCE_M, NOTHING_HAPPENS, Phrasing, TextWorld, command_names
from homiebot.types import EntityKind, Observation, WorldState

log = logging.getLogger(__name__)

SUITE_PATH = MUEP_SUITE_FILE
#: ALFWorld's instruction templates per type (``alfworld/gen/goal_library.py``; one of two is drawn). They are
#: kept word for word because text agents trained on ALFWorld expect exactly these.
TEMPLATES: dict[str, tuple[str, str]] = {
    "pick_and_place_simple": ("put a {obj} in {recep}", "put some {obj} on {recep}"),
    "look_at_obj_in_light": ("look at {obj} under the {toggle}", "examine the {obj} with the {toggle}"),
    "pick_clean_then_place_in_recep": ("put a clean {obj} in {recep}", "clean some {obj} and put it in {recep}"),
    "pick_heat_then_place_in_recep": ("put a hot {obj} in {recep}", "heat some {obj} and put it in {recep}"),
    "pick_cool_then_place_in_recep": ("put a cool {obj} in {recep}", "cool some {obj} and put it in {recep}"),
    "pick_two_obj_and_place": ("put two {obj} in {recep}", "find two {obj} and put them in {recep}"),
}
#: The furniture function each treatment type needs.
TREATMENT: dict[str, str] = {
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
}
_STATE_FLAG = {"clean": "is_clean", "heat": "is_hot", "cool": "is_cold"}
#: Seen and unseen scenes (ALFWorld's valid_unseen are rooms never trained on; here, apartments).
SEEN_SCENES: tuple[str, ...] = ("apartment_1", "apartment_2", "apartment_3", "apartment_4")
UNSEEN_SCENES: tuple[str, ...] = ("apartment_5", "apartment_6", "apartment_7")


@dataclass(frozen=True)
class AlfredTask:
    """One task. Types are ALFWorld words (:func:`homiebot.textworld.names.alfred_type`): ``apple``, ``fridge``."""

    id: str
    task_type: str
    scene: str
    seed: int
    split: str
    object_type: str
    receptacle_type: str = ""  # empty for look at in light
    toggle_type: str = ""  # the lamp's type for look at in light
    instruction: str = ""

    def __post_init__(self) -> None:
        if self.task_type not in TASK_TYPES:
            raise ValueError(f"task {self.id}: unknown task type {self.task_type!r}; known: {', '.join(TASK_TYPES)}")
        needs = "toggle_type" if self.task_type == "look_at_obj_in_light" else "receptacle_type"
        if not getattr(self, needs):
            raise ValueError(f"task {self.id}: a {self.task_type} task needs {needs}")


def instruction_for(task_type: str, obj: str, recep: str = "", toggle: str = "", variant: int = 0) -> str:
    return TEMPLATES[task_type][variant % 2].format(obj=obj, recep=recep, toggle=toggle)


def _typed(state: WorldState, kind: EntityKind, word: str) -> list[str]:
    return sorted(n for n, e in state.entities.items() if e.kind is kind and alfred_type(e.category) == word)


def goal_conditions(task: AlfredTask, state: WorldState) -> tuple[int, int]:
    """ALFRED's goal conditions met and their number, on the simulator's state.

    In a receptacle means on or in it (ALFWorld's ``inReceptacle``), not in the hand. Look at in light: a
    target object in the hand (1) and a lamp of the target type on, within the robot's reach (D1's 2 m)
    (ALFRED: the lamp toggled and visible)."""
    total = GOAL_CONDITIONS[task.task_type]
    objects = _typed(state, EntityKind.OBJECT, task.object_type)
    if task.task_type == "look_at_obj_in_light":
        holding = state.held in objects
        lamps = _typed(state, EntityKind.FURNITURE, task.toggle_type)
        lit = any(state.entities[lamp].powered_on and state.reach_distance(lamp) <= AT_DISTANCE_M for lamp in lamps)
        return int(holding) + int(lit), total
    receptacles = set(_typed(state, EntityKind.FURNITURE, task.receptacle_type))
    placed = [o for o in objects if state.entities[o].parent in receptacles and not state.entities[o].held]
    if task.task_type == "pick_and_place_simple":
        return int(bool(placed)), total
    if task.task_type == "pick_two_obj_and_place":
        best = max((sum(state.entities[o].parent == r for o in placed) for r in receptacles), default=0)
        return min(2, best), total
    flag = _STATE_FLAG[TREATMENT[task.task_type]]
    treated = [o for o in objects if getattr(state.entities[o], flag)]
    return int(bool(placed)) + int(bool(treated)) + int(bool(set(placed) & set(treated))), total


def goal_satisfied(task: AlfredTask, state: WorldState) -> bool:
    met, total = goal_conditions(task, state)
    return met == total


# ----------------------------------------------------------------------------------------- observations


class Observe(str, enum.Enum):
    """What a planner is given after each step (MuEP section 4.2 runs text models on the text observation and
    multimodal models on the egocentric image with the task and their own action history)."""

    TEXT = "text"  # ALFWorld's text observation (the intro at the start)
    IMAGES = "images"  # the robot's four rendered views, the task sentence and the commands played so far
    BOTH = "both"  # the text observation and the four views, of the same simulator state

    @property
    def with_text(self) -> bool:
        return self is not Observe.IMAGES

    @property
    def with_images(self) -> bool:
        return self is not Observe.TEXT


#: A thing counts as shown by the views when it covers at least this many pixels of one view's instance
#: segmentation: the threshold of the privileged world-graph builder (docs/perception.md, PrivilegedConfig).
VIEW_MIN_PIXELS = 12


@dataclass(frozen=True)
class MuepObservation:
    """One observation of an episode under an :class:`Observe` mode. ``text`` is None in the images mode and
    ``views`` None in the text mode; ``task`` (``Your task is to: ...``) and ``command`` (the command just
    played, None at the start) are always given. Text and views are taken from the same simulator state."""

    mode: Observe
    task: str
    text: str | None = None
    views: Observation | None = None
    command: str | None = None

    def shown(self, world: TextWorld, min_pixels: int = VIEW_MIN_PIXELS) -> list[str]:
        """The ALFWorld names of the receptacles and objects the views show (instance segmentation, at least
        ``min_pixels`` in one view), in ALFWorld's order; empty without views. This is how a text-only
        model reads the images (a vision-language model would take ``views.images()`` themselves)."""
        if self.views is None:
            return []
        table = world.names
        names = [table.to_text[n] for n in self.views.visible_instances(min_pixels) if n in table.to_text]
        return sorted(names, key=lambda t: (t.rsplit(" ", 1)[0], int(t.rsplit(" ", 1)[1])))


def observe(world: TextWorld, mode: Observe, text: str, command: str | None = None) -> MuepObservation:
    """The observation of ``mode`` now: ``text`` (the step's text) kept or dropped, the views rendered or not."""
    views = world.sim.observe() if mode.with_images else None
    if views is not None and any(view.rgb.size == 0 for view in views.views.values()):
        raise ValueError(f"--observe {mode.value} needs a simulator that renders its views (render=True)")
    task = f"Your task is to: {world.instruction}." if world.instruction else ""
    return MuepObservation(mode, task, text if mode.with_text else None, views, command)


# ----------------------------------------------------------------------------------------------- agents


class TextAgent(Protocol):
    """Plays ALFWorld commands in the simulator's world. ``act`` returns the next command, or None to stop.
    ``admissible`` is ALFWorld's list of the commands that apply now (the random baseline draws from it)."""

    name: str

    def reset(self, task: AlfredTask, world: TextWorld, observation: MuepObservation) -> None: ...

    def act(self, observation: MuepObservation, admissible: list[str]) -> str | None: ...


class TextExpert:
    """A privileged planner (MuEP's demonstrations come from the FF planner on full metadata): reads the
    simulator's state and the task, and issues the next command. Containers are opened while the hand is
    empty (the simulator opens only with an empty hand)."""

    name = "expert"

    def __init__(self) -> None:
        self._task: AlfredTask | None = None
        self._world: TextWorld | None = None

    def reset(self, task: AlfredTask, world: TextWorld, observation: MuepObservation) -> None:
        self._task, self._world = task, world

    def act(self, observation: MuepObservation, admissible: list[str]) -> str | None:
        task, world = self._task, self._world
        assert task is not None and world is not None
        state = world.sim.state()
        if goal_satisfied(task, state):
            return None
        names = world.names
        text = names.text
        self._note(observation, world, state)
        objects = [o for o in _typed(state, EntityKind.OBJECT, task.object_type) if o in names.to_text and self._knows(o)]
        held = state.held

        def go_or(target: str, command: str) -> str:
            return command if world.location == target else f"go to {text(target)}"

        if task.task_type == "look_at_obj_in_light":
            lamp = _typed(state, EntityKind.FURNITURE, task.toggle_type)[0]
            if held in objects:
                return go_or(lamp, f"use {text(lamp)}")
            return self._fetch(world, state, objects, held) or self._search(world, state)
        receptacles = _typed(state, EntityKind.FURNITURE, task.receptacle_type)
        # Pick two: fill the receptacle that already holds the most; otherwise the first.
        target = max(receptacles, key=lambda r: sum(state.entities[o].parent == r for o in objects))
        entity = state.entities[target]
        if entity.articulated and not entity.is_open:
            if held is not None:
                return (
                    world.put_command(text(held), text(world.location)) if world.location else f"go to {text(target)}"
                )
            return go_or(target, f"open {text(target)}")
        done = {o for o in objects if state.entities[o].parent == target}
        if held in objects and held not in done:
            treatment = TREATMENT.get(task.task_type)
            if treatment is not None and not getattr(state.entities[held], _STATE_FLAG[treatment]):
                appliance = next(n for n in names.receptacles if treatment in state.entities[n].functions)
                return go_or(appliance, f"{treatment} {text(held)} with {text(appliance)}")
            return go_or(target, world.put_command(text(held), text(target)))
        return self._fetch(world, state, [o for o in objects if o not in done], held) or self._search(world, state)

    def _note(self, observation: MuepObservation, world: TextWorld, state: WorldState) -> None:
        """Take in what the last observation showed (the privileged expert needs nothing from it)."""

    def _knows(self, obj: str) -> bool:
        """Whether the expert may act on ``obj`` (this one knows where everything is)."""
        return True

    def _search(self, world: TextWorld, state: WorldState) -> str | None:
        """The command that looks for an object it does not know of (this one knows every object: none)."""
        return None

    @staticmethod
    def _fetch(world: TextWorld, state: WorldState, candidates: list[str], held: str | None) -> str | None:
        text = world.names.text
        if held is not None:  # something else in the hand: put it down where the robot stands
            return world.put_command(text(held), text(world.location)) if world.location else None
        reachable = [o for o in candidates if state.entities[o].parent in world.names.to_text]
        if not reachable:
            return None
        obj = reachable[0]
        source = state.entities[obj].parent
        assert source is not None
        box = state.entities[source]
        if world.location != source:
            return f"go to {text(source)}"
        if box.articulated and not box.is_open and state.entities[obj].relation == "in":
            return f"open {text(source)}"
        return f"take {text(obj)} from {text(source)}"


#: An ALFWorld name in an observation: a type word and its number ("apple 1", "butterknife 2").
_NAMED = re.compile(r"\b([a-z]+ [0-9]+)\b")


class SearchingTextExpert(TextExpert):
    """The expert without its knowledge of where objects are: it fetches an object only once an observation has
    named it, and until then searches the receptacles that can hold things, in the order the room sentence lists
    them, opening what is closed.

    Why: the privileged expert goes straight to the task's object before any observation shows it, so a model
    trained on its episodes cannot tell from its prompt where to go and learns to take whatever it sees (the MuEP
    continuation of docs/results/muep-trained-planner-2026-11-30.md). ALFWorld's agents search the room the same
    way (ReAct's and MuEP's trajectories go from receptacle to receptacle until the object appears). Everything
    this expert acts on is in its chat: the room sentence lists the receptacles, arriving at or opening one names
    what is there, and objects move only when the agent moves them, so where a named object was seen is where it
    still is. The one thing it still takes from the simulator is which receptacles can hold things (a floor lamp
    cannot), a fact about the receptacle's type."""

    name = "searching-expert"

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()  # object instances some observation has named
        self._searched: set[str] = set()  # receptacles whose whole content an observation has shown

    def reset(self, task: AlfredTask, world: TextWorld, observation: MuepObservation) -> None:
        super().reset(task, world, observation)
        self._seen, self._searched = set(), set()  # the intro is taken in by the first act(), as every observation

    def _note(self, observation: MuepObservation, world: TextWorld, state: WorldState) -> None:
        names = world.names
        for word in _NAMED.findall(observation.text or ""):
            instance = names.instance(word)
            if instance is not None and instance in names.objects:
                self._seen.add(instance)
        here = world.location
        if here is not None and (not state.entities[here].articulated or state.entities[here].is_open):
            # The arrival or the opening just described all of it (the text world's describe()).
            self._searched.add(here)

    def _knows(self, obj: str) -> bool:
        return obj in self._seen

    def _search(self, world: TextWorld, state: WorldState) -> str | None:
        text = world.names.text
        for receptacle in world.names.receptacles:
            if receptacle in self._searched or not world.can_hold(receptacle):
                continue
            if world.location != receptacle:
                return f"go to {text(receptacle)}"
            if state.held is not None:  # the simulator opens only with an empty hand: put the thing down first
                return world.put_command(text(state.held), text(receptacle))
            return f"open {text(receptacle)}"  # here and closed (an open one was searched on arrival)
        return None  # searched everywhere: the object is not in this room


class RandomTextAgent:
    """Uniform over the admissible commands (without help, look and inventory, which change nothing)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def reset(self, task: AlfredTask, world: TextWorld, observation: MuepObservation) -> None:
        self.rng = random.Random(f"{task.id}")

    def act(self, observation: MuepObservation, admissible: list[str]) -> str | None:
        useful = [c for c in admissible if c not in ("help", "look", "inventory")]
        return self.rng.choice(useful) if useful else None


# ----------------------------------------------------------------------------------------------- episodes


@dataclass(frozen=True)
class TextEpisode:
    """One played task: MuEP's record plus the transcript (command, observation)."""

    episode: MuepEpisode
    transcript: tuple[tuple[str, str], ...]
    intro: str


def run_text_episode(
    sim: Simulator,
    task: AlfredTask,
    agent: TextAgent,
    phrasing: Phrasing | str = Phrasing.ALFWORLD,
    policy: RepetitionStop | None = None,
    mode: Observe | str = Observe.TEXT,
) -> TextEpisode:
    """Reset the scene, play until the goal holds, the agent stops, or MuEP's policy ends the episode.

    ``mode`` says what the agent is given after each step (:class:`Observe`); the images modes need a
    simulator that renders. The transcript keeps the text of every step whatever the mode."""
    mode = Observe(mode)
    policy = policy if policy is not None else RepetitionStop()
    policy.reset()
    sim.reset(task.scene, seed=task.seed)
    world = TextWorld(sim, phrasing)
    intro = world.reset(task.instruction)
    observation = observe(world, mode, intro)
    agent.reset(task, world, observation)
    transcript: list[tuple[str, str]] = []
    valid: list[bool] = []
    success = goal_satisfied(task, sim.state())
    while not success:
        admissible = world.admissible_commands()
        command = agent.act(observation, admissible)
        if command is None or not policy.allows(command):
            break
        step = world.step(command)
        transcript.append((step.command, step.observation))
        # Language compliance: a command of the game's grammar (whether or not it applies now), as MuEP's LC.
        valid.append(step.observation != NOTHING_HAPPENS or _grammatical(step.command, world))
        success = goal_satisfied(task, sim.state())
        if not success:  # the views of a finished episode would be rendered for nobody
            observation = observe(world, mode, step.observation, step.command)
    met, total = goal_conditions(task, sim.state())
    episode = MuepEpisode(
        task_type=task.task_type,
        success=success,
        goal_conditions_met=met,
        goal_conditions_total=total,
        actions=tuple(c for c, _ in transcript),
        valid=tuple(valid),
        split=task.split,
        stopped_on_repeat=policy.stopped == "repeat",
        task_id=task.id,
    )
    return TextEpisode(episode, tuple(transcript), intro)


def _grammatical(command: str, world: TextWorld) -> bool:
    """A command is in the grammar when its verb pattern matches and every name in it is a name of the game."""
    parsed = command_names(command, world.phrasing)
    return parsed is not None and all(world.names.instance(n) is not None for n in parsed)


# ----------------------------------------------------------------------------------------------- the suite


def _candidates(scene: str, seed: int, sim: Simulator) -> list[AlfredTask]:
    """Every task of every type this scene allows (MuEP's filters 1-3), before the start-state filter."""
    sim.reset(scene, seed=seed)
    state = sim.state()
    spec = sim.scene_spec()
    holders = {f.name for f in spec.furniture if f.surfaces or f.interior is not None}
    furniture = [n for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE and n in holders]
    receptacle_types = sorted({alfred_type(state.entities[n].category) for n in furniture})
    object_types = sorted({alfred_type(e.category) for e in state.entities.values() if e.kind is EntityKind.OBJECT})
    counts = {t: len(_typed(state, EntityKind.OBJECT, t)) for t in object_types}
    functions = {f for e in state.entities.values() for f in e.functions}
    lamps = sorted({alfred_type(e.category) for e in state.entities.values() if "light" in e.functions})
    out = []
    for task_type in TASK_TYPES:
        treatment = TREATMENT.get(task_type)
        if treatment is not None and treatment not in functions:
            continue  # filter 1: nothing to heat with in this room
        for obj in object_types:
            if task_type == "pick_two_obj_and_place" and counts[obj] < 2:
                continue
            if task_type == "look_at_obj_in_light":
                out += [AlfredTask("", task_type, scene, seed, "", obj, toggle_type=lamp) for lamp in lamps]
                continue
            out += [AlfredTask("", task_type, scene, seed, "", obj, receptacle_type=r) for r in receptacle_types]
    return out


def generate_suite(
    per_type: int = 40,
    scenes_seen: Iterable[str] = SEEN_SCENES,
    scenes_unseen: Iterable[str] = UNSEEN_SCENES,
    seed: int = 0,
    sim_factory: Callable[[], Simulator] | None = None,
) -> list[AlfredTask]:
    """``per_type`` tasks per type, half on seen and half on unseen scenes, each verified: the goal does not
    hold at all at the start (no condition met) and the expert solves it in the simulator within 30 steps."""
    if sim_factory is None:
        from homiebot.sim.mujoco.backend import MujocoSimulator

        def sim_factory() -> Simulator:
            return MujocoSimulator(render=False)

    sim = sim_factory()
    rng = random.Random(seed)
    tasks: list[AlfredTask] = []
    try:
        for split, scenes in (("seen", tuple(scenes_seen)), ("unseen", tuple(scenes_unseen))):
            quota = per_type // 2 if split == "seen" else per_type - per_type // 2
            pools: dict[str, list[AlfredTask]] = {t: [] for t in TASK_TYPES}
            for index, scene in enumerate(scenes):
                for cand in _candidates(scene, 100 * index + seed, sim):
                    pools[cand.task_type].append(cand)
            for task_type in TASK_TYPES:
                pool = pools[task_type]
                rng.shuffle(pool)
                chosen = 0
                for cand in pool:
                    if chosen == quota:
                        break
                    number = sum(t.task_type == task_type for t in tasks) + 1
                    variant = rng.randrange(2)
                    instruction = instruction_for(
                        task_type, cand.object_type, cand.receptacle_type, cand.toggle_type, variant
                    )
                    task = AlfredTask(
                        id=f"muep-{split}-{task_type}-{number:03d}",
                        task_type=task_type,
                        scene=cand.scene,
                        seed=cand.seed + number,
                        split=split,
                        object_type=cand.object_type,
                        receptacle_type=cand.receptacle_type,
                        toggle_type=cand.toggle_type,
                        instruction=instruction,
                    )
                    if _verified(sim, task):
                        tasks.append(task)
                        chosen += 1
                if chosen < quota:
                    raise SceneError(
                        f"only {chosen} verifiable {task_type} tasks on the {split} scenes (wanted {quota})"
                    )
    finally:
        sim.shutdown()
    return tasks


def _verified(sim: Simulator, task: AlfredTask) -> bool:
    sim.reset(task.scene, seed=task.seed)
    if goal_conditions(task, sim.state())[0] != 0:
        return False  # MuEP's filter 4 (and stricter: no condition may hold at the start)
    return run_text_episode(sim, task, TextExpert()).episode.success


def save_suite(tasks: list[AlfredTask], path: Path = SUITE_PATH) -> None:
    header = "# MuEP-style suite (docs/muep.md): generated by homiebot.eval.muep_suite.generate_suite; every task verified by the expert.\n"
    path.write_text(header + yaml.safe_dump([asdict(t) for t in tasks], sort_keys=False, width=120))


def load_suite(path: Path | str = SUITE_PATH) -> list[AlfredTask]:
    """The suite's tasks; a missing or malformed file is a SceneError naming it."""
    path = Path(path)
    if not path.exists():
        raise SceneError(f"MuEP suite not found: {path}")
    try:
        data = load_yaml(path.read_text())
        return [AlfredTask(**row) for row in data]
    except (yaml.YAMLError, TypeError, ValueError) as err:
        raise SceneError(f"invalid MuEP suite {path}: {err}") from None

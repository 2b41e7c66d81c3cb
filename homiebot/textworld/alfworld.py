"""The real ALFWorld engine as a backend: our scenes exported as ALFWorld game folders and played through
alfworld's TextWorld environment (the ``textworld`` extra: ``alfworld==0.4.2``, ``textworld==1.7.0``).

A game folder is what ``alfworld.agents.environment.alfred_tw_env.AlfredTWEnv`` collects
(docs/textworld.md): ``initial_state.pddl`` (a PDDL problem of ALFWorld's domain ``alfred.pddl``),
``traj_data.json`` (the task type and its parameters) and ``game.tw-pddl`` (domain, grammar with the task
written in, problem, ``"solvable": true``). :func:`export_game` writes one from the simulator's state at the
start of a task; :class:`AlfworldGame` plays one, ours or the user's own ALFWorld data
(:func:`find_games` under ``--alfworld-data DIR``, the official ``valid_seen`` / ``valid_unseen`` splits).

Names: ALFWorld's demangler names an entity by the part of its id before ``_bar_`` and a number in sorted-id
order, so the ids written here (``apple_bar_01``) give the names the parallel text world uses (``apple 1``).
A lamp, furniture in our scenes, is an object in ALFWorld (``toggleable``, in a receptacle): it is exported
as a ``floorlamp`` object standing in a receptacle of its own named ``floor``. docs/textworld.md lists where
the two engines' dynamics differ.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homiebot.sim.base import Simulator
from homiebot.tasks.alfred import GOAL_CONDITIONS, TASK_TYPES
from homiebot.textworld.names import NameTable, alfred_type
from homiebot.types import WorldState

log = logging.getLogger(__name__)

#: The PutObject template of ALFWorld 0.4's grammar and the papers' (ALFWorld <= 0.3.5) replacement.
_MOVE_TEMPLATE = "move {o} to {r}"
_PUT_TEMPLATE = "put {o} in/on {r}"


class AlfworldUnavailable(RuntimeError):
    """The ``textworld`` extra is not installed."""


def _alfworld() -> Any:
    # alfworld.info creates ~/.cache/alfworld at import unless ALFWORLD_DATA names another directory.
    os.environ.setdefault("ALFWORLD_DATA", str(Path(tempfile.gettempdir()) / "homiebot-alfworld"))
    try:
        import alfworld.info
        import textworld  # noqa: F401
    except ImportError as err:
        raise AlfworldUnavailable(
            "the ALFWorld engine needs the 'textworld' extra: pip install -e '.[textworld]'"
        ) from err
    return alfworld.info


def available() -> bool:
    try:
        _alfworld()
    except AlfworldUnavailable:
        return False
    return True


def _type_name(word: str) -> str:
    """A PDDL type constant for an ALFWorld word: ``countertop`` -> ``CountertopType``."""
    return word[:1].upper() + word[1:] + "Type"


def _entity_id(text_name: str) -> str:
    """A mangled id whose demangled name is ``text_name`` (``apple 2`` -> ``apple_bar_02``). The demangler
    appends "basin" to any id containing it, so a sink basin's word goes before and after the bar."""
    word, number = text_name.rsplit(" ", 1)
    if word.endswith("basin"):
        return f"{word[: -len('basin')]}_bar_{int(number):02d}_bar_basin"
    return f"{word}_bar_{int(number):02d}"


@dataclass(frozen=True)
class ExportedGame:
    folder: Path
    game_file: Path
    instruction: str


def export_game(
    sim: Simulator,
    task_type: str,
    object_type: str,
    receptacle_type: str,
    toggle_type: str,
    instruction: str,
    folder: Path,
    phrasing: str = "alfworld",
) -> ExportedGame:
    """Write an ALFWorld game folder for the simulator's current state and one task (types are ALFWorld words)."""
    info = _alfworld()
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}")
    state = sim.state()
    names = NameTable.from_state(state)
    spec = sim.scene_spec()
    holders = {f.name for f in spec.furniture if f.surfaces or f.interior is not None}
    problem = _problem(state, names, holders, task_type, object_type, receptacle_type, toggle_type)
    traj = {
        "task_type": task_type,
        "pddl_params": {
            "object_target": object_type,
            "parent_target": receptacle_type,
            "toggle_target": toggle_type,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"scene_name": state.scene},
    }
    grammar = Path(info.ALFRED_TWL2_PATH).read_text()
    if phrasing == "papers":
        grammar = grammar.replace(_MOVE_TEMPLATE, _PUT_TEMPLATE).replace(
            "You move the {o.name} to the {r.name}.", "You put the {o.name} in/on the {r.name}."
        )
    grammar = grammar.replace("UNKNOWN GOAL", instruction)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_state.pddl").write_text(problem)
    (folder / "traj_data.json").write_text(json.dumps(traj, indent=1))
    game = {
        "pddl_domain": Path(info.ALFRED_PDDL_PATH).read_text(),
        "grammar": grammar,
        "pddl_problem": problem,
        "solvable": True,
    }
    game_file = folder / "game.tw-pddl"
    game_file.write_text(json.dumps(game))
    return ExportedGame(folder, game_file, instruction)


def _problem(
    state: WorldState,
    names: NameTable,
    holders: set[str],
    task_type: str,
    object_type: str,
    receptacle_type: str,
    toggle_type: str,
) -> str:
    objects: dict[str, str] = {"agent1": "agent", "loc_bar_start": "location"}
    init: list[str] = ["(atLocation agent1 loc_bar_start)", "(= (total-cost) 0)"]
    rtypes: set[str] = set()
    otypes: set[str] = set()
    lamps = [r for r in names.receptacles if "light" in state.entities[r].functions]
    for index, r in enumerate(names.receptacles):
        entity = state.entities[r]
        loc = f"loc_bar_{index + 1:02d}"
        objects[loc] = "location"
        if r in lamps:
            # A lamp is an object in ALFWorld: it stands on a floor receptacle of its own.
            floor = f"floor_bar_{lamps.index(r) + 1:02d}"
            lamp = _entity_id(names.text(r))
            objects[floor] = "receptacle"
            objects[lamp] = "object"
            rtypes.add("FloorType")
            otypes.add(_type_name(alfred_type(entity.category)))
            init += [
                f"(receptacleType {floor} FloorType)",
                f"(receptacleAtLocation {floor} {loc})",
                f"(objectType {lamp} {_type_name(alfred_type(entity.category))})",
                f"(toggleable {lamp})",
                f"(inReceptacle {lamp} {floor})",
                f"(objectAtLocation {lamp} {loc})",
            ]
            if entity.powered_on:
                init.append(f"(isOn {lamp})")
            continue
        rid = _entity_id(names.text(r))
        rtype = _type_name(alfred_type(entity.category))
        objects[rid] = "receptacle"
        rtypes.add(rtype)
        init += [f"(receptacleType {rid} {rtype})", f"(receptacleAtLocation {rid} {loc})"]
        if entity.articulated:
            init.append(f"(openable {rid})")
            if entity.is_open:
                init.append(f"(opened {rid})")
        for o in state.objects_in(r):
            if o in names.to_text:
                init += [f"(inReceptacle {_entity_id(names.text(o))} {rid})", f"(objectAtLocation {_entity_id(names.text(o))} {loc})"]
    for o in names.objects:
        entity = state.entities[o]
        oid = _entity_id(names.text(o))
        otype = _type_name(alfred_type(entity.category))
        objects[oid] = "object"
        otypes.add(otype)
        # Our simulator lets any object be cleaned, heated and cooled (docs/textworld.md).
        init += [f"(objectType {oid} {otype})", f"(pickupable {oid})", f"(cleanable {oid})", f"(heatable {oid})", f"(coolable {oid})"]
        for flag, predicate in ((entity.is_clean, "isClean"), (entity.is_hot, "isHot"), (entity.is_cold, "isCool")):
            if flag:
                init.append(f"({predicate} {oid})")
    # Anything fits in anything that holds things (our receptacles have no per-type limits).
    holder_types = {_type_name(alfred_type(state.entities[r].category)) for r in names.receptacles if r in holders}
    for rtype in sorted(holder_types):
        init += [f"(canContain {rtype} {otype})" for otype in sorted(otypes)]
    # The types the goal names must exist even when the scene has none (then the game is unsolvable).
    if receptacle_type:
        rtypes.add(_type_name(receptacle_type))
    otypes.add(_type_name(object_type))
    if toggle_type:
        otypes.add(_type_name(toggle_type))
    # ALFWorld's appliances act by receptacle type: declare ours with ALFWorld's type names as well.
    alias_types = {"heat": "MicrowaveType", "cool": "FridgeType", "clean": "SinkBasinType"}
    for r in names.receptacles:
        for function in state.entities[r].functions:
            own = _type_name(alfred_type(state.entities[r].category)).lower()
            if function in alias_types and r not in lamps and alias_types[function].lower() != own:  # PDDL ignores case
                init.append(f"(receptacleType {_entity_id(names.text(r))} {alias_types[function]})")
                rtypes.add(alias_types[function])
    for t in sorted(rtypes):
        objects[t] = "rtype"
    for t in sorted(otypes - rtypes):
        objects[t] = "otype"
    goal = _goal(task_type, object_type, receptacle_type, toggle_type)
    lines = ["(define (problem homiebot)", "(:domain alfred)", "(:objects"]
    lines += [f"    {name} - {kind}" for name, kind in objects.items()]
    lines += [")", "(:init"] + [f"    {fact}" for fact in dict.fromkeys(init)] + [")", goal, ")"]
    return "\n".join(lines) + "\n"


def _goal(task_type: str, object_type: str, receptacle_type: str, toggle_type: str) -> str:
    from alfworld.gen import goal_library

    template = goal_library.gdict[task_type]["pddl"]
    filled = template.format(
        obj=object_type[:1].upper() + object_type[1:],
        recep=receptacle_type[:1].upper() + receptacle_type[1:],
        toggle=toggle_type[:1].upper() + toggle_type[1:],
        mrecep="",
    )
    # The library writes types with '#' for '-' and closes the problem itself; the problem is closed above.
    body = filled.replace("#", "-").strip()
    return body[: body.rfind(")")].rstrip()


# ---------------------------------------------------------------------------------------------------- play


@dataclass(frozen=True)
class AlfworldStep:
    observation: str
    won: bool
    admissible: tuple[str, ...]
    seconds: float


class AlfworldGame:
    """One game played through alfworld's TextWorld environment (with ALFWorld's demangler, and its
    planner expert when ``expert=True``: Fast Downward's plan in ``expert_plan``)."""

    def __init__(self, game_file: Path | str, expert: bool = False) -> None:
        _alfworld()
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredExpertType

        wrappers: list[Any] = [AlfredDemangler]
        if expert:
            wrappers.append(lambda env=None: AlfredExpert(env, expert_type=AlfredExpertType.PLANNER))
        infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=expert, facts=True)
        self.env = textworld.start(str(game_file), request_infos=infos, wrappers=wrappers)
        self.expert = expert
        self.expert_plan: list[str] = []
        self.facts: list[Any] = []

    def reset(self) -> AlfworldStep:
        started = time.perf_counter()
        state = self.env.reset()
        return self._step_of(state, started)

    def step(self, command: str) -> AlfworldStep:
        started = time.perf_counter()
        state, _score, _done = self.env.step(command)
        return self._step_of(state, started)

    def _step_of(self, state: Any, started: float) -> AlfworldStep:
        self.facts = list(state.get("facts") or [])
        if self.expert:
            self.expert_plan = list(state.get("extra.expert_plan") or state.get("policy_commands") or [])
        return AlfworldStep(
            observation=str(state["feedback"]).strip(),
            won=bool(state["won"]),
            admissible=tuple(state["admissible_commands"] or ()),
            seconds=time.perf_counter() - started,
        )

    def goal_conditions(self, task: Any) -> tuple[int, int]:
        """ALFRED's goal conditions met and their number, from the game's facts (``task``: an
        :class:`homiebot.eval.muep_suite.AlfredTask`). The lamp condition is ALFWorld's own: a lamp of the type
        toggled at some point and the agent at its location."""
        return goal_conditions_from_facts(self.facts, task.task_type, task.object_type, task.receptacle_type, task.toggle_type)

    def close(self) -> None:
        self.env.close()


def goal_conditions_from_facts(
    facts: list[Any], task_type: str, object_type: str, receptacle_type: str, toggle_type: str
) -> tuple[int, int]:
    total = GOAL_CONDITIONS[task_type]
    pairs: dict[str, set[tuple[str, ...]]] = {}
    for fact in facts:
        pairs.setdefault(fact.name.lower(), set()).add(tuple(a.name.lower() for a in fact.arguments))

    def of_type(predicate: str, word: str) -> set[str]:
        return {args[0] for args in pairs.get(predicate, ()) if args[1] == f"{word}type".lower()}

    objects = of_type("objecttype", object_type)
    if task_type == "look_at_obj_in_light":
        holding = any(args[1] in objects for args in pairs.get("holds", ()))
        lamps = of_type("objecttype", toggle_type) & {args[0] for args in pairs.get("istoggled", ())}
        agent_at = {args[1] for args in pairs.get("atlocation", ())}
        lamp_places = {args[1] for args in pairs.get("objectatlocation", ()) if args[0] in lamps}
        return int(holding) + int(bool(agent_at & lamp_places)), total
    receptacles = of_type("receptacletype", receptacle_type)
    inside = [(o, r) for o, r in pairs.get("inreceptacle", ()) if o in objects and r in receptacles]
    if task_type == "pick_and_place_simple":
        return int(bool(inside)), total
    if task_type == "pick_two_obj_and_place":
        per_receptacle = [sum(1 for _, r2 in inside if r2 == r) for r in receptacles]
        return min(2, max(per_receptacle, default=0)), total
    predicate = {"pick_clean_then_place_in_recep": "isclean", "pick_heat_then_place_in_recep": "ishot"}.get(task_type, "iscool")
    treated = {args[0] for args in pairs.get(predicate, ())} & objects
    placed = {o for o, _ in inside}
    return int(bool(placed)) + int(bool(treated)) + int(bool(placed & treated)), total


_SPLITS = ("train", "valid_seen", "valid_unseen", "valid_train", "seen", "unseen")


def find_games(data_dir: Path | str, split: str | None = None) -> Iterator[tuple[str, Path]]:
    """The playable games under an ALFWorld data directory (``$ALFWORLD_DATA/json_2.1.1/...``), as
    ``(split, game file)``: folders with ``traj_data.json`` and a solvable ``game.tw-pddl``, of the six task
    types, skipping ALFWorld's movable-receptacle and sliced tasks (as ``AlfredTWEnv`` does)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"ALFWorld data directory not found: {root}")
    for traj in sorted(root.rglob("traj_data.json")):
        folder = traj.parent
        text = str(folder)
        if "movable" in text or "Sliced" in text:
            continue
        game = folder / "game.tw-pddl"
        if not game.exists():
            continue
        try:
            task_type = json.loads(traj.read_text())["task_type"]
            solvable = json.loads(game.read_text()).get("solvable", False)
        except (OSError, ValueError, KeyError):
            log.warning("skipping %s: unreadable traj_data.json or game.tw-pddl", folder)
            continue
        if task_type not in TASK_TYPES or not solvable:
            continue
        game_split = next((p for p in reversed(folder.parts) if p in _SPLITS), "")
        if split is None or game_split == split:
            yield game_split, game


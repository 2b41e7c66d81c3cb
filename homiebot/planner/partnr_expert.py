"""PARTNR's heuristic expert: a privileged planner that plans from the task's evaluation function.

PARTNR ("PARTNR: A Benchmark for Planning and Reasoning in Embodied Multi-agent Tasks", section 4 and
table 2, "Heuristic-Expert") runs an expert with full observability that pre-plans from the evaluation
function. Ours is the single-robot, closed-loop version: every round it feeds the state into a
:class:`~homiebot.tasks.partnr.tracker.PropositionTracker` and works on the first proposition (in the
temporal DAG's order, dependency heads first) that is not done:

* placements (``is_on_top``, ``is_inside``, ``is_on_or_in``, ``is_in_room``): pick an object of the OR-list
  that is not already serving another done placement, carry it to the first receptacle (for a room: a
  surface of a furniture in that room), opening a closed destination before the pick (one hand);
* ``is_next_to(a, b)``: carry ``a`` and Put it with ``b`` as the place (the simulator's next-to placement); when
  both still have to go onto one receptacle, the larger first, so that the smaller finds room beside it;
* ``is_powered_on/off``: Turn on / Turn off; ``is_clean``: Clean the held object at a sink; ``is_filled``:
  Fill the held container at a sink, or Pour a filled container in the hand into the target (PARTNR's Fill and
  Pour, appendix A.9.1; all need the household action list, docs/textworld.md);
* ``is_open/is_closed``: Open / Close; ``is_held``: Pick; ``is_robot_in_room``: Go to.

A proposition is done when it holds now (or, outside the terminal-satisfaction constraint, has held once).
The expert ends when every proposition is done. It answers in EMMOE's format like the goal expert.

:class:`PromptBoundPartnrExpertPlanner` (``prompt-bound-partnr-expert``, the training data's: ``homie data collect
--suite partnr``) chooses the object of an OR-list ("one of the apples") by what the text mode's prompt shows, one
within reach first, then by name, instead of the nearest, whose distance no prompt states (docs/training.md,
"Determinable prompts"). The evaluation's expert keeps the nearest.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.prompt import format_output
from homiebot.tasks.partnr.convert import goal_to_evaluation
from homiebot.tasks.partnr.explain import phrase
from homiebot.tasks.partnr.language import EvaluationFunction, EvaluationProposition, dependency_graph
from homiebot.tasks.partnr.predicates import PLACEMENT_PREDICATES, room_matches
from homiebot.tasks.partnr.tracker import PropositionTracker
from homiebot.types import EntityKind, Subtask, WorldState

log = logging.getLogger(__name__)

NAV_MODEL = "NoMaD"
OBJECT_NAV_MODEL = "PixNav"
ARTICULATION_MODEL = "octo"
GRASP_MODEL = "RT-1-X"
#: Within this reach distance (m) the expert acts instead of going closer; EMMOE's D2 is 0.1 m.
INTERACT_RANGE_M = 1.0
NEAR_LIMIT_M = 0.1
#: Right after a successful Go to, anything within EMMOE's D1 limit counts as reached.
FAR_LIMIT_M = 2.0


@dataclass
class _Memory:
    tracker: PropositionTracker | None = None
    last: Subtask | None = None
    opened: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class PlannedStep:
    """One step the expert chose: the subtask, the low-level model and the analysis line that says why
    (what a subclass's ``_decide`` returns: the two-agent expert of :mod:`homiebot.multiagent.pair`)."""

    subtask: Subtask
    model: str
    why: str


class PartnrExpertPlanner(Planner):
    """Privileged planner: evaluation function + world state -> the next subtask."""

    name = "partnr_expert"
    privileged = True
    accepts_free_text = False

    #: Choose an OR-list's object by what the text prompt shows (module docstring), not by distance.
    prompt_bound = False

    def __init__(self) -> None:
        self._memory = _Memory()
        self._surfaces: set[str] | None = None  # furniture with a surface (from the scene spec)
        #: The states this episode's rounds were planned on (state 0 = after the reset), for verification.
        self.seen_states: list[WorldState] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self._memory = _Memory()
        self.seen_states = []

    # ------------------------------------------------------------------------------------ Planner API

    def plan(self, request: PlanRequest) -> str:
        state = request.world_state
        if state is None:
            raise ValueError("the PARTNR expert needs the privileged world state")
        memory = self._memory
        scene = request.scene
        self._surfaces = {f.name for f in scene.furniture if f.surfaces} if scene is not None else None
        self.seen_states.append(state)
        if memory.tracker is None:
            memory.tracker = PropositionTracker(self._function(request, state))
        tracker = memory.tracker
        tracker.update(state)
        step = self._decide(tracker, state, request)
        memory.last = step.subtask
        return format_output(step.why, step.subtask, step.model)

    @staticmethod
    def _function(request: PlanRequest, state: WorldState) -> EvaluationFunction:
        given: Any = request.evaluation
        if isinstance(given, EvaluationFunction):
            return given
        if isinstance(given, dict):
            return EvaluationFunction.from_json(given)
        goal = request.goal
        if goal is None:
            raise ValueError("the PARTNR expert needs an evaluation function (the task's) or a goal")
        return goal_to_evaluation(goal, state)

    # ------------------------------------------------------------------------------------ deciding

    def _order(self, function: EvaluationFunction) -> list[int]:
        graph = dependency_graph(function)
        graph.add_edges_from(function.temporal_edges())
        return list(nx.lexicographical_topological_sort(graph))

    def _done(self, tracker: PropositionTracker, index: int) -> bool:
        current = tracker.states[-1][index].is_satisfied
        if index in tracker.function.terminal_indices():
            return current
        return current or tracker.satisfied_at[index] != -1

    def _decide(self, tracker: PropositionTracker, state: WorldState, request: PlanRequest) -> PlannedStep:
        function = tracker.function
        ancestors_graph = nx.DiGraph(function.temporal_edges())
        for index in self._order(function):
            if self._done(tracker, index):
                continue
            before = nx.ancestors(ancestors_graph, index) if index in ancestors_graph else set()
            if any(tracker.satisfied_at[a] == -1 for a in before):
                continue  # an earlier step is not done yet; it comes first in the order
            step = self._step_for(function.propositions[index], index, tracker, state, request)
            if step is not None:
                return step
        # Everything done (or nothing left that the expert can do): put down what is held? No: end.
        return PlannedStep(Subtask("End"), "", "All steps of the task are done, so the task is complete.")

    def _in_use(self, tracker: PropositionTracker, exclude: int) -> set[str]:
        """Objects that satisfy another placement that must still hold at the end: moving them would undo it."""
        used: set[str] = set()
        terminal = tracker.function.terminal_indices()
        for i, prop in enumerate(tracker.function.propositions):
            if i == exclude or i not in terminal or not tracker.states[-1][i].is_satisfied:
                continue
            if prop.function_name in PLACEMENT_PREDICATES or prop.function_name == "is_next_to":
                info = tracker.states[-1][i].info
                for key in ("object_handles", "entity_handles_a"):
                    if info.get(key):
                        used.add(str(info[key]))
        return used

    def _reachable(self, state: WorldState, name: str) -> bool:
        distance = state.reach_distance(name)
        last = self._memory.last
        limit = FAR_LIMIT_M if last is not None and last.action == "Go to" and last.target == name else INTERACT_RANGE_M
        return NEAR_LIMIT_M <= distance <= limit

    def _approach(self, state: WorldState, name: str, step: PlannedStep) -> PlannedStep:
        if self._reachable(state, name):
            return step
        kind = state.entities[name].kind
        model = OBJECT_NAV_MODEL if kind is EntityKind.OBJECT else NAV_MODEL
        return PlannedStep(Subtask("Go to", name), model, f"{step.why.rstrip('.')}, so I should first go to the {name}.")

    def _step_for(self, prop: EvaluationProposition, index: int, tracker: PropositionTracker,
                  state: WorldState, request: PlanRequest) -> PlannedStep | None:
        name = prop.function_name
        args = prop.args
        categories = tracker.categories
        want = f"To make sure {phrase(prop, categories, should=False)}".replace(" should have been", "")
        if name in ("is_on_top", "is_inside", "is_on_or_in", "is_in_room"):
            used = self._in_use(tracker, index)
            objects = [o for o in args["object_handles"] if o not in used or o == state.held]
            if not objects:
                return None
            if name == "is_in_room":
                place = self._surface_in_room(state, args["room_ids"])
                if place is None:
                    return None
            else:
                place = args["receptacle_handles"][0]
            partner = self._pending_partner(tracker, state, objects, place)
            if partner is not None:
                # A pending next-to with an object already there: one Put satisfies both.
                return self._carry(state, [partner[0]], partner[1], want)
            larger = self._larger_partner(tracker, state, objects, place)
            if larger is not None:
                return self._carry(state, [larger], place, want)
            return self._carry(state, objects, place, want)
        if name == "is_next_to":
            return self._carry(state, list(args["entity_handles_a"]), args["entity_handles_b"][0], want)
        if name in ("is_powered_on", "is_powered_off"):
            target = args["object_handles"][0]
            action = "Turn on" if name == "is_powered_on" else "Turn off"
            return self._approach(state, target, PlannedStep(Subtask(action, target), ARTICULATION_MODEL, want + "."))
        if name == "is_clean":
            obj = args["object_handles"][0]
            if state.held != obj:
                return self._pick(state, [obj], want)
            cleaners = self._faucets(state)
            if not cleaners:
                return None
            return self._approach(state, cleaners[0], PlannedStep(Subtask("Clean", obj, cleaners[0]), GRASP_MODEL, want + "."))
        if name == "is_filled":
            return self._fill(state, list(args["object_handles"]), want)
        if name in ("is_open", "is_closed"):
            target = args["object_handles"][0]
            if state.held is not None:
                return self._set_down(state, want)
            action = "Open" if name == "is_open" else "Close"
            return self._approach(state, target, PlannedStep(Subtask(action, target), ARTICULATION_MODEL, want + "."))
        if name == "is_held":
            return self._pick(state, list(args["object_handles"]), want)
        if name == "is_robot_in_room":
            return PlannedStep(Subtask("Go to", args["room_ids"][0]), NAV_MODEL, want + ".")
        return None  # count_equals, has_distinct_categories, clusters: the goal expert's business

    def _pending_partner(self, tracker: PropositionTracker, state: WorldState, objects: list[str],
                         place: str) -> tuple[str, str] | None:
        """(object, partner) of a not-yet-satisfied next-to whose partner already rests on ``place``.

        A next-to that holds only because one of its objects is in the gripper beside the other is not met
        yet: putting the object down elsewhere on the surface would break it again."""
        for i, prop in enumerate(tracker.function.propositions):
            if prop.function_name != "is_next_to":
                continue
            sides = (prop.args["entity_handles_a"], prop.args["entity_handles_b"])
            carried = state.held is not None and state.held in (*sides[0], *sides[1])
            if tracker.states[-1][i].is_satisfied and not carried:
                continue
            for movers, partners in (sides, sides[::-1]):  # next to is symmetric
                for a in movers:
                    if a not in objects:
                        continue
                    for b in partners:
                        if b != a and state.entities[b].parent == place and not state.entities[b].held:
                            return a, b
        return None

    def _owns(self, index: int) -> bool:
        """Whether proposition ``index`` is this planner's to do (all of them; a pair's agent has its share)."""
        return True

    def _larger_partner(self, tracker: PropositionTracker, state: WorldState, objects: list[str],
                        place: str) -> str | None:
        """The object to carry to ``place`` before ``objects`` when both must rest there next to each other: the
        partner of a next-to whose own placement onto ``place`` is still to do, with the larger footprint, while
        neither is there yet and no object of ``objects`` is in the hand (None otherwise).

        The simulator puts an object anywhere on a surface that has room, so the first of the two may land in the
        middle of a small one (a chair's seat) and leave no spot beside it for a larger second: the next-to Put then
        fails every time, and the expert, which plans from the state alone, asks for it again until the round limit
        (partnr-4-020 on the scene seed 10311: the orange in the middle of the seat, the banana 0.18 m long). The
        larger first, as first-fit decreasing packs bins, leaves the smaller room beside it."""
        if state.held is not None and state.held in objects:
            return None
        function = tracker.function
        bound = {
            str(o)
            for i, prop in enumerate(function.propositions)
            if prop.function_name in PLACEMENT_PREDICATES and prop.function_name != "is_in_room"
            and self._owns(i) and not self._done(tracker, i) and place in prop.args.get("receptacle_handles", ())[:1]
            for o in prop.args["object_handles"]
        }
        for prop in function.propositions:
            if prop.function_name != "is_next_to":
                continue
            sides = (prop.args["entity_handles_a"], prop.args["entity_handles_b"])
            for movers, partners in (sides, sides[::-1]):  # next to is symmetric
                for a in movers:
                    if a not in objects or state.entities[a].parent == place:
                        continue
                    for b in partners:
                        if (b != a and b in bound and b in state.entities and state.entities[b].parent != place
                                and _footprint(state, b) > _footprint(state, a)):
                            return str(b)
        return None

    # ------------------------------------------------------------------------------------ water

    @staticmethod
    def _faucets(state: WorldState) -> list[str]:
        """Furniture with a faucet (PARTNR's world description: "furnitures [that] have a faucet"): ours are the
        sinks, the furniture that cleans; nearest first."""
        return sorted((n for n, e in state.entities.items() if "clean" in e.functions),
                      key=lambda n: (state.reach_distance(n), n))

    def _fill(self, state: WorldState, targets: list[str], want: str) -> PlannedStep | None:
        """``is_filled(targets)``: a container of the OR-list in the hand is filled at the nearest faucet; a
        filled container in the hand that is not a target is poured into the nearest target no agent holds
        (PARTNR's Pour, how a "pour the water into the bowl" task is meant); else a target is picked first."""
        held = state.held
        if held is not None and held in targets:
            faucets = self._faucets(state)
            if not faucets:
                return None
            return self._approach(state, faucets[0], PlannedStep(Subtask("Fill", held, faucets[0]), GRASP_MODEL, want + "."))
        free = [t for t in targets if not state.entities[t].held]
        if held is not None and state.entities[held].is_filled and free:
            into = min(free, key=lambda t: (state.reach_distance(t), t))
            return self._approach(state, into, PlannedStep(Subtask("Pour", held, into), GRASP_MODEL,
                                                     f"{want}, I pour the water of the {held} into it."))
        return self._pick(state, free or targets, want)

    # ------------------------------------------------------------------------------------ carrying

    def _carry(self, state: WorldState, objects: list[str], place: str, want: str) -> PlannedStep:
        held = state.held
        if held is not None and held in objects:
            container = state.entities[place] if place in state.entities else None
            reference = container.parent if container is not None and container.kind is EntityKind.OBJECT else None
            closed_target = reference if reference is not None else place
            if state.entities[closed_target].is_open is False:
                # Holding the object at a closed destination: set it down first (one hand cannot open).
                return self._set_down(state, want)
            return self._approach(state, place, PlannedStep(Subtask("Put", held, place), GRASP_MODEL, want + "."))
        if held is not None:
            return self._set_down(state, want)
        # Open a closed destination before the pick (a one-hand robot cannot open while holding).
        target_entity = state.entities[place]
        destination = target_entity.parent if target_entity.kind is EntityKind.OBJECT else place
        if destination is not None and state.entities[destination].is_open is False:
            return self._approach(state, destination,
                                  PlannedStep(Subtask("Open", destination), ARTICULATION_MODEL, want + f", the {destination} must be open."))
        return self._pick(state, objects, want)

    def _pick(self, state: WorldState, objects: list[str], want: str) -> PlannedStep:
        if state.held is not None and state.held not in objects:
            return self._set_down(state, want)
        if self.prompt_bound:
            candidates = sorted(objects, key=lambda o: (not self._reachable(state, o), o))
        else:
            candidates = sorted(objects, key=lambda o: (state.reach_distance(o), o))
        obj = candidates[0]
        container = state.entities[obj].parent
        if container is not None and state.entities[obj].relation == "in" and state.entities[container].is_open is False:
            return self._approach(state, container,
                                  PlannedStep(Subtask("Open", container), ARTICULATION_MODEL, want + f", the {container} must be open."))
        return self._approach(state, obj, PlannedStep(Subtask("Pick", obj), GRASP_MODEL, want + f", I should pick up the {obj}."))

    def _set_down(self, state: WorldState, want: str) -> PlannedStep:
        """Put what is held on the nearest open surface so the hand is free."""
        held = state.held
        assert held is not None
        surfaces = sorted(
            (e for e in state.entities.values()
             if e.kind is EntityKind.FURNITURE and not e.articulated
             and (self._surfaces is None or e.name in self._surfaces)),
            key=lambda e: (state.reach_distance(e.name), e.name),
        )
        spot = surfaces[0].name
        return self._approach(state, spot, PlannedStep(Subtask("Put", held, spot), GRASP_MODEL,
                                                 f"{want}, my hand must be free first."))

    def _surface_in_room(self, state: WorldState, rooms: list[str]) -> str | None:
        with_surface = self._surfaces
        for room in rooms:
            options = sorted(
                e.name for e in state.entities.values()
                if e.kind is EntityKind.FURNITURE and not e.articulated and room_matches(state, e.room, room)
                and (with_surface is None or e.name in with_surface)
            )
            if options:
                return min(options, key=lambda n: (state.reach_distance(n), n))
        return None


def _footprint(state: WorldState, name: str) -> float:
    """Radius of the circle about an object's footprint (m), as the simulator's placement measures it: a box's half
    diagonal, a round object's radius (``yaw`` None); 0 when its extents are unknown."""
    entity = state.entities[name]
    if entity.half_extents is None:
        return 0.0
    half_x, half_y = entity.half_extents[0], entity.half_extents[1]
    return half_x if entity.yaw is None else math.hypot(half_x, half_y)


class PromptBoundPartnrExpertPlanner(PartnrExpertPlanner):
    """The PARTNR expert as the training data's expert (module docstring): an OR-list's object within reach first,
    then by name."""

    name = "prompt-bound-partnr-expert"
    prompt_bound = True

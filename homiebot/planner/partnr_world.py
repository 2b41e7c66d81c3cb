"""PARTNR's world description and typed per-round grammar for language planners on PARTNR-style tasks.

PARTNR (Chang et al., 2024; appendix A.16, and the ReAct baselines of section 5) gives its LLM planners a text
world description with a fixed structure: every room with the furniture in it, the furniture that has a faucet,
then the objects the agent has observed so far with the furniture and room they are in (or who holds them), with
their states where they matter. Its planners decode each call under a grammar over the entities of that
description only ("valid tool calls on observed entities", appendix A.9), typed per argument: a pick names an
observed object, an open an articulated furniture, a navigation any room, furniture or observed object
(``docs/partnr.md``, "Language planners on the suite"). This module is our build of both for the EMMOE answer
format (``Analysis / Subtask / Model``, :mod:`homiebot.planner.constrained`):

* :class:`PartnrWorld` is the world as a PARTNR planner sees it, built from the simulator state (PARTNR's oracle
  perception) with PARTNR's partial observability at room granularity: an object is observed once the robot has
  been in its room (PARTNR's ``Explore[room]`` reveals a room's objects; our robot explores by going there), and
  stays observed. :meth:`PartnrWorld.text` writes the layout (our wording, PARTNR's structure).
* :func:`typed_arguments` gives, for each action of the task's list, the names each argument may take;
  :func:`typed_grammar` renders them as the EBNF of one answer. An action the task does not offer, an
  unobserved object, a Put of something the robot does not hold: none can be decoded.
* :class:`PartnrWorldHFPlanner` (``--planner hf_partnr``) is the local model planner (``--planner hf``: SmolLM2
  and the other text models) with both: it reads the state (never the goal or the evaluation function), hands
  the model the PARTNR layout as its world description and, with ``--constrained``, decodes under the typed
  grammar instead of the untyped one.

Decisions: object locations and states are the simulator's current ones for observed objects (PARTNR's oracle
world graph updates what it has observed); furniture states are written after the furniture's name
(``fridge (closed)``, ``lamp (off)``), object states after its place (``clean`` / ``not clean``), since the
suite's clean and powered-on propositions read them; Put's place is a furniture or an observed object (the
simulator puts next to an object, PARTNR's ``is_next_to``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from homiebot.config import AnswerFormat
from homiebot.config.planners import HFPartnrPlannerConfig
from homiebot.planner.base import PlanRequest
from homiebot.planner.constrained import AnswerConstraint
from homiebot.planner.hf_backend import HFPlanner
from homiebot.skills.actions import HandRule, action_spec
from homiebot.types import EMMOE_ACTIONS, Action, EntityKind, EntityState, WorldState

log = logging.getLogger(__name__)

#: Characters a name may not contain inside ``[...]`` (they would change how the Subtask line splits).
_FORBIDDEN = frozenset(",[]\n\r")
#: Furniture functions that treat the held object (docs/textworld.md) and the function a faucet gives.
_FAUCET_FUNCTION = "clean"

_ANALYSIS_HEAD = "Analysis: "
_SUBTASK_OPEN = "\nSubtask: ["
_SUBTASK_CLOSE = "]\nModel: "
_SUBTASK_HEAD = "Subtask: ["


@dataclass(frozen=True)
class ObservedObject:
    """Where an observed object is: on or in a furniture of a room, on the floor of a room, or held."""

    furniture: str | None
    room: str | None
    held: bool = False
    clean: bool | None = None


@dataclass(frozen=True)
class PartnrWorld:
    """The world as a PARTNR planner sees it (module docstring)."""

    rooms: tuple[str, ...]
    furniture: Mapping[str, str | None]  # name -> room
    furniture_states: Mapping[str, tuple[str, ...]]  # name -> ("closed",), ("on",), ...
    faucets: tuple[str, ...]
    articulated: tuple[str, ...]
    appliances: tuple[str, ...]  # what Turn on / Turn off act on
    functions: Mapping[str, tuple[str, ...]]  # furniture -> its functions (clean, heat, cool, light)
    objects: Mapping[str, ObservedObject]  # observed objects only
    held: str | None = None

    @classmethod
    def from_state(cls, state: WorldState, explored_rooms: Iterable[str], *, observe_all: bool = False) -> PartnrWorld:
        """The description of ``state`` for a robot that has been in ``explored_rooms`` (plus the room it is in);
        ``observe_all``: every object observed (the text planning mode's world, which lists them all)."""
        entities = state.entities
        rooms = tuple(sorted(e.name for e in entities.values() if e.kind is EntityKind.ROOM))
        explored = set(explored_rooms) | ({state.robot_room} if state.robot_room else set())
        furniture = {e.name: e for e in entities.values() if e.kind is EntityKind.FURNITURE}
        objects: dict[str, ObservedObject] = {}
        for entity in entities.values():
            if entity.kind is not EntityKind.OBJECT:
                continue
            held = entity.held or entity.name == state.held
            if not held and not observe_all and _room_of(entity, entities) not in explored:
                continue
            parent = entity.parent if entity.parent in furniture else None
            objects[entity.name] = ObservedObject(parent, _room_of(entity, entities), held, entity.is_clean)
        return cls(
            rooms=rooms,
            furniture={name: e.room for name, e in sorted(furniture.items())},
            furniture_states={name: _furniture_states(e) for name, e in furniture.items() if _furniture_states(e)},
            faucets=tuple(sorted(n for n, e in furniture.items() if _FAUCET_FUNCTION in e.functions)),
            articulated=tuple(sorted(n for n, e in furniture.items() if e.articulated and e.interactive)),
            appliances=tuple(sorted(e.name for e in entities.values() if e.appliance)),
            functions={n: tuple(e.functions) for n, e in furniture.items() if e.functions},
            objects=dict(sorted(objects.items())),
            held=state.held,
        )

    def text(self) -> str:
        """The layout: ``Furniture:`` with one line per room, the faucet line, then ``Objects:`` with one line per
        observed object (``name: furniture in room`` / ``name: held by the robot``)."""
        lines = ["Furniture:"]
        for room in self.rooms:
            names = [self._furniture_label(n) for n, r in self.furniture.items() if r == room]
            lines.append(f"{room}: {', '.join(names) if names else '(nothing)'}")
        unroomed = [self._furniture_label(n) for n, r in self.furniture.items() if r not in self.rooms]
        if unroomed:
            lines.append(f"room unknown: {', '.join(unroomed)}")
        lines.append("")
        lines.append(f"Furniture with a faucet: {', '.join(self.faucets) if self.faucets else 'none'}")
        lines.append("Objects:")
        if not self.objects:
            lines.append("No objects seen yet")
        for name, where in self.objects.items():
            if where.held:
                place = "held by the robot"
            else:
                place = f"{where.furniture or 'the floor'} in {where.room or 'a room not known'}"
            if where.clean is not None:
                place += f" ({'clean' if where.clean else 'not clean'})"
            lines.append(f"{name}: {place}")
        return "\n".join(lines)

    def _furniture_label(self, name: str) -> str:
        states = self.furniture_states.get(name, ())
        return f"{name} ({', '.join(states)})" if states else name

    def names(self) -> tuple[str, ...]:
        """Every name the description gives (rooms, furniture, observed objects)."""
        return tuple(dict.fromkeys([*self.rooms, *self.furniture, *self.objects]))


def _room_of(entity: EntityState, entities: Mapping[str, EntityState]) -> str | None:
    if entity.room:
        return entity.room
    parent = entities.get(entity.parent or "")
    return parent.room if parent is not None else None


def _furniture_states(entity: EntityState) -> tuple[str, ...]:
    states = []
    if entity.articulated and entity.interactive and entity.is_open is not None:
        states.append("open" if entity.is_open else "closed")
    if entity.appliance and entity.powered_on is not None:
        states.append("on" if entity.powered_on else "off")
    return tuple(states)


def typed_arguments(world: PartnrWorld, actions: Sequence[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """For each action of ``actions`` that can be written now, the names each of its arguments may take.

    Go to: rooms, furniture, observed objects. Pick: observed objects the robot does not hold. Put: the held
    object, then a furniture or another observed object. Open / Close: articulated furniture. Turn on / off:
    appliances and lamps. Clean / Heat / Cool: the held object, then a furniture with that function. Fill: the held
    object, then a furniture with a faucet. Pour: the held object, then another observed object. End: none.
    An action left without a possible argument (Put with empty hands) is left out; an action this module does not
    know takes any described name, once or twice (the untyped grammar's rule)."""
    observed = [n for n, o in world.objects.items() if not o.held]
    held = [world.held] if world.held else []
    furniture = list(world.furniture)
    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for name in actions:
        action = Action.parse(name)
        slots: tuple[tuple[str, ...], ...]
        if action is Action.END:
            slots = ()
        elif action is Action.GO_TO:
            slots = (tuple([*world.rooms, *furniture, *observed]),)
        elif action is None:
            slots = (world.names(),)
        else:
            spec = action_spec(action)
            if spec.needs_place:
                if action is Action.PUT:
                    places = [*furniture, *observed]
                elif action is Action.FILL:  # at a faucet (the skill's rule: a furniture that cleans)
                    places = list(world.faucets)
                elif action is Action.POUR:  # into another container (the skill checks which objects hold water)
                    places = observed
                else:
                    wanted = action.value.lower()
                    places = [n for n, functions in world.functions.items() if wanted in functions]
                slots = (tuple(held), tuple(places))
            elif action in (Action.OPEN, Action.CLOSE):
                slots = (world.articulated,)
            elif action in (Action.TURN_ON, Action.TURN_OFF):
                slots = (world.appliances,)
            elif spec.hand is HandRule.EMPTY:  # Pick
                slots = (tuple(observed),)
            else:
                slots = (world.names(),)
        slots = tuple(tuple(n for n in dict.fromkeys(s) if n.strip() and not set(n) & _FORBIDDEN) for s in slots)
        if all(slots):  # every argument has at least one name (End has none to fill)
            out[name] = slots
    return out


def _literal(text: str) -> str:
    """An EBNF string literal (JSON escapes: what xgrammar, GBNF and vLLM's grammar parsers read)."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class TypedGrammar:
    """One round's typed grammar and what it allows (for tests and the prompt log)."""

    text: str
    arguments: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)


def typed_grammar(
    world: PartnrWorld,
    actions: Sequence[str],
    models: Sequence[str],
    *,
    max_new_tokens: int,
    analysis_max_chars: int | None = None,
    answer_format: AnswerFormat = AnswerFormat.ANALYSIS,
) -> TypedGrammar:
    """The EBNF of one answer (``Analysis: ...``, ``Subtask: [...]``, ``Model: ...``) whose subtask is typed by
    :func:`typed_arguments`. The analysis cap and the models each action may name are those of the untyped
    :class:`~homiebot.planner.constrained.AnswerConstraint` over the same lists and names (its longest answer
    bounds this grammar's, whose names are a subset), so the answer still fits ``max_new_tokens``. With
    ``answer_format`` ``subtask`` it starts at ``Subtask: [`` (no analysis), as the untyped grammar does."""
    arguments = typed_arguments(world, actions or EMMOE_ACTIONS)
    if not arguments:
        raise ValueError("no action of the task can be written in this world")
    options: dict[str, Any] = {"max_new_tokens": max_new_tokens, "answer_format": answer_format}
    if analysis_max_chars is not None:
        options["analysis_max_chars"] = analysis_max_chars
    untyped = AnswerConstraint.build(list(arguments), models, world.names(), **options)
    models_for = getattr(untyped, "models_for", None)  # the action -> model pairing, where the build has one
    rules: list[str] = []
    model_rules: dict[tuple[str, ...], str] = {}
    branches = []
    for index, (action, slots) in enumerate(arguments.items()):
        allowed = tuple(models_for(action)) if callable(models_for) else tuple(untyped.models)
        model_rule = model_rules.setdefault(allowed, f"models{len(model_rules) + 1}")
        parts = [_literal(action)]
        for position, names in enumerate(slots):
            rule = f"arg{index + 1}n{position + 1}"  # letters and digits: GBNF (llama.cpp) takes no "_"
            rules.append(f"{rule} ::= " + " | ".join(_literal(n) for n in names))
            parts.extend(['", "', rule])
        branches.append(f"({' '.join(parts)} {_literal(_SUBTASK_CLOSE)} {model_rule})")
    if answer_format is AnswerFormat.SUBTASK:
        head = [f"root ::= {_literal(_SUBTASK_HEAD)} subtask"]
    else:
        cap = max(untyped.analysis_max_chars - 1, 0)
        head = [
            f"root ::= {_literal(_ANALYSIS_HEAD)} analysis {_literal(_SUBTASK_OPEN)} subtask",
            # Printable ASCII without '[' (so that the Subtask line cannot start inside the analysis), first
            # character not a space: the untyped grammar's analysis rule.
            f"analysis ::= [!-Z\\\\-~] [ -Z\\\\-~]{{0,{cap}}}",
        ]
    text = "\n".join(
        [
            *head,
            "subtask ::= " + " | ".join(branches),
            *rules,
            *(f"{name} ::= " + " | ".join(_literal(m) for m in allowed) for allowed, name in model_rules.items()),
        ]
    )
    return TypedGrammar(text, arguments)


def text_mode_grammar(
    state: WorldState,
    actions: Sequence[str],
    models: Sequence[str],
    *,
    max_new_tokens: int,
    analysis_max_chars: int | None = None,
    answer_format: AnswerFormat = AnswerFormat.ANALYSIS,
) -> TypedGrammar:
    """The typed grammar for the hf planner's text mode (``--planner hf -p typed_grammar=true``): the arguments typed
    as :func:`typed_arguments` types them, over every entity of ``state``, since the text mode's world description
    (:func:`homiebot.planner.text_planning.describe_world`) lists every object from the start."""
    world = PartnrWorld.from_state(state, (), observe_all=True)
    return typed_grammar(world, actions, models, max_new_tokens=max_new_tokens,
                         analysis_max_chars=analysis_max_chars, answer_format=answer_format)


class PartnrWorldHFPlanner(HFPlanner):
    """``--planner hf_partnr``: the local model planner with PARTNR's world description and typed grammar
    (module docstring). Options are ``--planner hf``'s."""

    name = "hf_partnr"
    config_class = HFPartnrPlannerConfig
    privileged = False
    # The state, never the goal nor the evaluation function: what PARTNR's oracle perception gives its planners.
    reads_state = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._explored: set[str] = set()
        self._worlds: dict[int, PartnrWorld] = {}

    def reset(self, task: str, seed: int = 0) -> None:
        super().reset(task, seed)
        self._explored = set()

    def world_for(self, request: PlanRequest) -> PartnrWorld | None:
        """The request's world as this planner describes it (None without a state: then as ``--planner hf``)."""
        state = request.world_state
        if state is None:
            return None
        if state.robot_room:
            self._explored.add(state.robot_room)
        return PartnrWorld.from_state(state, self._explored)

    def plan_batch(self, requests: Sequence[PlanRequest]) -> list[str]:
        described = []
        self._worlds = {}
        for request in requests:
            world = self.world_for(request)
            if world is None:
                described.append(request)
                continue
            # The model reads the layout (and names only its entities); the state itself goes no further.
            converted = replace(request, world_state=None, world_description=world.text(), grounded_targets=world.names())
            self._worlds[id(converted)] = world
            described.append(converted)
        return super().plan_batch(described)

    def grammar_for(self, request: PlanRequest) -> str:
        world = self._worlds.get(id(request))
        if world is None:
            return super().grammar_for(request)
        return typed_grammar(world, request.actions, request.models, max_new_tokens=self.max_new_tokens,
                             analysis_max_chars=self.analysis_max_chars, answer_format=self.answer_format).text

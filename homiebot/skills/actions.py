"""Declared actions: each action of the planner's list is declared once, here, with what the executor checks
before running it and how the simulator runs it.

EMMOE's executor (EMMOE paper, appendix E.1) checks every subtask in one order: the format (F1/F2), the hand
(L1: a full hand cannot pick, open or close; L2: an empty one cannot put), a closed container (L3), an object
the action cannot act on (L4), the distance (D1 above 2 m, D2 below 0.1 m), then up to three tries. An
:class:`ActionSpec` says which of these apply to its action, so the executor runs the same pipeline for
EMMOE's five skills and for the household skills ALFWorld's task types need (``Turn on`` / ``Turn off`` an
appliance or a lamp; ``Clean`` / ``Heat`` / ``Cool`` the held object at a sink / microwave / fridge; ALFWorld's
``use``, ``clean``, ``heat`` and ``cool`` commands, docs/textworld.md). The feedback strings are EMMOE's
(``homiebot/executor/messages.py``) with the new action's word in them ("Unable to heat, the hand is empty",
"Can not turn on sofa! Please choose another object"). PARTNR's Fill and Pour (appendix A.9.1, the human's
liquid skills) are declared the same way: ``[Fill, mug, sink]`` fills the held container at a faucet,
``[Pour, mug, bowl]`` pours it into another container.

A new action is added by a member of :class:`homiebot.types.Action`, one :class:`ActionSpec` in
:data:`ACTION_SPECS`, and a simulator method behind a capability protocol (``homiebot/sim/base.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from homiebot.sim.base import Simulator, SupportsHouseholdSkills, SupportsLiquids
from homiebot.types import Action, EntityKind, EntityState, SkillResult, SkillStatus


class HandRule(str, enum.Enum):
    """What the planner's inventory must be for the action (EMMOE's logical errors L1 and L2)."""

    ANY = "any"
    EMPTY = "empty"  # L1 when something is held
    HOLDING = "holding"  # L2 when nothing is held


SkillCall = Callable[[Simulator, str, "str | None"], SkillResult]


@dataclass(frozen=True)
class StateRequirement:
    """A state the target of an action must be in (checked with the logical errors, before any try): ``test`` on
    its entity, ``message(action word, target as written)`` the feedback when it fails."""

    test: Callable[[EntityState], bool]
    message: Callable[[str, str], str]


@dataclass(frozen=True)
class ActionSpec:
    """One action of the planner's list and the checks the executor runs before its skill.

    Attributes:
        action: the action.
        sim_name: the name the simulator's ``precheck`` knows it by (``go_to``, ``heat``).
        run: one attempt of the skill on scene instance names (target, place).
        hand: L1 / L2 rule on the inventory.
        needs_place: the subtask names a place (``[Put, apple, fridge]``, ``[Heat, apple, microwave]``); the
            target is then the held object and the checks below are about the place.
        place_must_be_open: L3 when the place is a closed container.
        acts_on: L4 unless the subject (the place when there is one, else the target) passes this test.
        checks_distance: D1/D2 apply (every action but Go to).
        target_is: L4 unless the target itself passes this test (Fill / Pour: the held object holds water).
        target_needs: a state the target must be in, else L4 with the requirement's own message (Pour: the held
            container is filled).
    """

    action: Action
    sim_name: str
    run: SkillCall
    hand: HandRule = HandRule.ANY
    needs_place: bool = False
    place_must_be_open: bool = False
    acts_on: Callable[[EntityState], bool] | None = None
    checks_distance: bool = True
    target_is: Callable[[EntityState], bool] | None = None
    target_needs: StateRequirement | None = None

    @property
    def word(self) -> str:
        return self.action.value


def _movable_object(entity: EntityState) -> bool:
    """What a hand can pick: an object, not a furniture or a room. EMMOE's L4 is "the agent attempts to interact
    with a non-interactive object" (section 3.3); its appendix E.1 code checks it for Open and Close only, and a
    Pick of a sofa would fail three tries as E1, blaming the low-level model for the planner's logic error."""
    return entity.kind is EntityKind.OBJECT


def _interactive_furniture(entity: EntityState) -> bool:
    return entity.interactive and entity.kind is EntityKind.FURNITURE


def _appliance(entity: EntityState) -> bool:
    return entity.kind is EntityKind.FURNITURE and entity.powered_on is not None


def _has_function(function: str) -> Callable[[EntityState], bool]:
    def test(entity: EntityState) -> bool:
        return entity.kind is EntityKind.FURNITURE and function in entity.functions

    return test


def _container(entity: EntityState) -> bool:
    """An object that holds water (the simulator says so with ``is_filled`` not None)."""
    return entity.kind is EntityKind.OBJECT and entity.is_filled is not None


def _filled(entity: EntityState) -> bool:
    return entity.is_filled is True


def _empty_container(word: str, target: str) -> str:
    # Decision (EMMOE's L3 wording for a closed container, "you should open it first"): PARTNR's Pour fails
    # when the held container is empty.
    return f"Unable to {word}, the {target} is empty, you should fill it first"


def _liquid(call: Callable[[SupportsLiquids, str, str | None], SkillResult], word: str) -> SkillCall:
    """A skill call for a simulator that declares Fill and Pour; others answer with a failure."""

    def run(sim: Simulator, target: str, place: str | None) -> SkillResult:
        if not isinstance(sim, SupportsLiquids):
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"the {sim.name} simulator cannot {word}")
        return call(sim, target, place)

    return run


def _household(call: Callable[[SupportsHouseholdSkills, str, str | None], SkillResult], word: str) -> SkillCall:
    """A skill call for a simulator that declares the household skills; others answer with a failure."""

    def run(sim: Simulator, target: str, place: str | None) -> SkillResult:
        if not isinstance(sim, SupportsHouseholdSkills):
            return SkillResult(SkillStatus.EXECUTION_FAILED, f"the {sim.name} simulator cannot {word}")
        return call(sim, target, place)

    return run


def _with_place(call: Callable[[str, str], SkillResult], word: str, target: str, place: str | None) -> SkillResult:
    if place is None:
        return SkillResult(SkillStatus.EXECUTION_FAILED, f"{word} needs a place")
    return call(target, place)


ACTION_SPECS: dict[Action, ActionSpec] = {
    spec.action: spec
    for spec in (
        ActionSpec(Action.GO_TO, "go_to", lambda sim, t, p: sim.go_to(t), checks_distance=False),
        ActionSpec(Action.PICK, "pick", lambda sim, t, p: sim.pick(t), hand=HandRule.EMPTY, acts_on=_movable_object),
        ActionSpec(
            Action.PUT,
            "put",
            lambda sim, t, p: _with_place(sim.put, "put", t, p),
            hand=HandRule.HOLDING,
            needs_place=True,
            place_must_be_open=True,
        ),
        ActionSpec(Action.OPEN, "open", lambda sim, t, p: sim.open(t), hand=HandRule.EMPTY, acts_on=_interactive_furniture),
        ActionSpec(Action.CLOSE, "close", lambda sim, t, p: sim.close(t), hand=HandRule.EMPTY, acts_on=_interactive_furniture),
        # Switching needs no free hand: ALFWorld's look-at-in-light task switches the lamp on holding the object.
        ActionSpec(Action.TURN_ON, "turn_on", _household(lambda sim, t, p: sim.turn_on(t), "turn on"), acts_on=_appliance),
        ActionSpec(Action.TURN_OFF, "turn_off", _household(lambda sim, t, p: sim.turn_off(t), "turn off"), acts_on=_appliance),
        # Treatments act on the held object at a furniture with that function; ALFWorld heats with the
        # microwave closed, so no place is required to be open.
        ActionSpec(
            Action.CLEAN,
            "clean",
            _household(lambda sim, t, p: _with_place(sim.clean, "clean", t, p), "clean"),
            hand=HandRule.HOLDING,
            needs_place=True,
            acts_on=_has_function("clean"),
        ),
        ActionSpec(
            Action.HEAT,
            "heat",
            _household(lambda sim, t, p: _with_place(sim.heat, "heat", t, p), "heat"),
            hand=HandRule.HOLDING,
            needs_place=True,
            acts_on=_has_function("heat"),
        ),
        ActionSpec(
            Action.COOL,
            "cool",
            _household(lambda sim, t, p: _with_place(sim.cool, "cool", t, p), "cool"),
            hand=HandRule.HOLDING,
            needs_place=True,
            acts_on=_has_function("cool"),
        ),
        # PARTNR's Fill: the held container at a furniture with a faucet (our sinks, the furniture that cleans).
        ActionSpec(
            Action.FILL,
            "fill",
            _liquid(lambda sim, t, p: _with_place(sim.fill, "fill", t, p), "fill"),
            hand=HandRule.HOLDING,
            needs_place=True,
            acts_on=_has_function("clean"),
            target_is=_container,
        ),
        # PARTNR's Pour: "from whichever container is currently held" into the named one; here the place.
        ActionSpec(
            Action.POUR,
            "pour",
            _liquid(lambda sim, t, p: _with_place(sim.pour, "pour", t, p), "pour"),
            hand=HandRule.HOLDING,
            needs_place=True,
            acts_on=_container,
            target_is=_container,
            target_needs=StateRequirement(_filled, _empty_container),
        ),
    )
}


def action_spec(action: Action) -> ActionSpec:
    """The declaration of a skill action (every action but End)."""
    try:
        return ACTION_SPECS[action]
    except KeyError:
        raise ValueError(f"{action.value} is not a skill action") from None

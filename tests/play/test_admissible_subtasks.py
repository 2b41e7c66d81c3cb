"""The admissible subtasks ``homie play`` lists are exactly the manipulations the executor carries out.

For a few states of the demo-drawer episode (at the start, beside the drawer, holding the can), every
manipulation of EMMOE's list on every object and furniture is executed from a fresh replay of the same state
with the real executor and the noiseless skill layer; the listed ones must be the ones that succeed."""

from __future__ import annotations

import pytest

from homiebot.executor.executor import Executor
from homiebot.play.keyboard import admissible_subtasks
from homiebot.sim.base import make_simulator
from homiebot.skills import SkillSet
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, EntityKind, ErrorCode, Subtask

SCENE = "apartment_1"
PREFIXES = {
    "start": [],
    "beside the drawer": [Subtask("Go to", "kitchen_drawer")],
    "holding the can": [Subtask("Go to", "kitchen_drawer"), Subtask("Open", "kitchen_drawer"),
                        Subtask("Go to", "short_can"), Subtask("Pick", "short_can")],
}


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=False)
    yield simulator
    simulator.shutdown()


def _replay(sim, prefix):
    """Reset and run ``prefix``; returns the executor and the HLP inventory after it."""
    sim.reset(SCENE, seed=0)
    executor = Executor(sim, skills=SkillSet(sim, noise=None, seed=0))
    inventory: tuple[str, ...] = ()
    for subtask in prefix:
        feedback = executor.execute(subtask, _model(subtask), inventory)
        assert feedback.code is ErrorCode.OK, (subtask, feedback)
        inventory = feedback.inventory
    return executor, inventory


def _model(subtask: Subtask) -> str:
    return {"Go to": "NoMaD", "Open": "octo", "Close": "octo"}.get(subtask.action, "RT-1-X")


def _candidates(state):
    objects = sorted(n for n, e in state.entities.items() if e.kind is EntityKind.OBJECT and not e.held)
    furniture = sorted(n for n, e in state.entities.items() if e.kind is EntityKind.FURNITURE)
    out = [Subtask("Pick", o) for o in objects]
    out += [Subtask(a, f) for a in ("Open", "Close") for f in furniture]
    if state.held:
        out += [Subtask("Put", state.held, f) for f in furniture]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("where", list(PREFIXES))
def test_listed_manipulations_are_the_ones_that_succeed(sim, where):
    prefix = PREFIXES[where]
    _, inventory = _replay(sim, prefix)
    state = sim.state()
    listed = admissible_subtasks(state, inventory, EMMOE_ACTIONS, EMMOE_MODELS)
    manipulations = {c.subtask for c in listed if c.subtask.action not in ("Go to", "End")}
    succeeded, no_ops = set(), set()
    for candidate in _candidates(state):
        executor, inventory = _replay(sim, prefix)
        if executor.execute(candidate, _model(candidate), inventory).code is ErrorCode.OK:
            # Closing what is closed (opening what is open) succeeds and changes nothing: not worth listing.
            after = sim.state().entities[candidate.target]
            before = state.entities[candidate.target]
            unchanged = candidate.action in ("Open", "Close") and after.is_open == before.is_open
            (no_ops if unchanged else succeeded).add(candidate)
    assert manipulations == succeeded
    assert succeeded, "every state here has something to do within reach"
    # Every Go to and End are listed too, with the usual models.
    go_tos = {c.subtask.target for c in listed if c.subtask.action == "Go to"}
    assert go_tos == {n for n, e in state.entities.items()
                      if e.kind is EntityKind.FURNITURE or (e.kind is EntityKind.OBJECT and not e.held)}
    assert listed[-1].subtask == Subtask("End") and listed[-1].model == "None"
    assert {c.model for c in listed if c.subtask.action == "Go to"} == {"NoMaD"}


def test_without_a_state_only_end_is_listed():
    listed = admissible_subtasks(None, (), EMMOE_ACTIONS, EMMOE_MODELS)
    assert [c.subtask for c in listed] == [Subtask("End")]

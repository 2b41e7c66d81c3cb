"""Looking into a container on arrival: where the head camera points after a Go to or an Open.

The four first-person views come from fixed cameras 1.10 m high, tilted 15 degrees down
(:mod:`homiebot.sim.mujoco.robot`). From there a sink's basin and a pulled-out drawer's tray are hidden behind their
front walls: after the oracle's Go to the sink in emmoe-049, not one pixel of the bowl or the sponge 1.1 m away
(docs/results/physical-perception-2026-11-30.md). A Fetch looks into such a container the way a person leans over
it: it raises its torso (0.386 m of travel: the head camera goes from 1.10 to 1.49 m) and tilts its head towards the
container's inside (:meth:`homiebot.sim.mujoco.backend.MujocoSimulator.look_at`). The loop does that after a
successful Go to or Open whose target is a furniture with an interior that is open (a sink's basin, an open drawer,
fridge or cabinet) and fuses the objects of that one view (:meth:`homiebot.agent.knowledge.WorldKnowledge.glance`).

Where to look comes from the map, as the furniture does for the skills (docs/perception.md, "What the skills read"):
the interior box the semantic map annotates (``EntityState.interior_min`` / ``interior_max``) and whether the robot
left it open; never where an object is.
"""

from __future__ import annotations

from homiebot.types import Action, EntityKind, Subtask, WorldState

#: The subtasks after which the robot stands at a furniture it may look into.
LOOK_AFTER = (Action.GO_TO, Action.OPEN)


def look_target(grounded: Subtask, state: WorldState) -> tuple[float, float, float] | None:
    """The point the head camera aims at after ``grounded`` (simulator instance names) succeeded: the centre of the
    target furniture's interior, when it has one and it is open (articulated ones) or open-topped (a sink); else
    None (no look)."""
    action = Action.parse(grounded.action)
    if action not in LOOK_AFTER or grounded.target is None:
        return None
    furniture = state.entities.get(grounded.target)
    if furniture is None or furniture.kind is not EntityKind.FURNITURE:
        return None
    if furniture.interior_min is None or furniture.interior_max is None:
        return None
    if furniture.articulated and not furniture.is_open:
        return None
    low, high = furniture.interior_min, furniture.interior_max
    return ((low[0] + high[0]) / 2, (low[1] + high[1]) / 2, (low[2] + high[2]) / 2)

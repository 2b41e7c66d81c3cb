"""The scene representation the recovery stages read (CMFR, Farag et al. 2025, section 4.4 and appendix E).

CMFR prunes the agent's object memory to the objects the plan mentions and keeps, for each, the properties
that matter for its tasks, the receptacle holding it, what it holds, and what the agent holds. Its clauses
read ``(Mug_1 in Sink_1)``, ``(Sink_1 contains Cup_1, Fork_1 and Spoon_1)``, ``(Fridge_1 is closed)``,
``(agent holding Mug_1)``. We build the same clauses from:

* the **privileged world state** (perception off): the simulator's state, read without the goal (the
  request's state-without-goal view); EMMOE's scenes have no sliced/cooked states, so the properties are
  open/closed, on/off for appliances, and clean/hot/cold where the state has them;
* the **world graph's description** (perception on: what the robot has observed, the analogue of CMFR's
  memory of observed objects): the description's lines that mention a relevant name.

"Relevant" is every name the task text, the steps so far or the failing step mention, plus what they
contain or stand in, as in CMFR.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from homiebot.types import EntityKind, EntityState, WorldState


@lru_cache(maxsize=8192)  # the same names and aliases are matched every round
def _words(text: str) -> str:
    return " " + " ".join(re.split(r"[^a-z0-9]+", text.lower().replace("_", " "))) + " "


def mentioned_names(state: WorldState, texts: Iterable[str]) -> list[str]:
    """Entity names of ``state`` mentioned in ``texts`` (by name or alias, underscores read as spaces)."""
    haystack = "".join(_words(t) for t in texts)
    found = []
    for name, entity in state.entities.items():
        if entity.kind is EntityKind.ROOM:
            continue
        for label in (name, *entity.aliases):
            if label and _words(label) in haystack:
                found.append(name)
                break
    return sorted(found)


def _join(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _properties(entity: EntityState) -> list[str]:
    clauses = []
    if entity.articulated and entity.is_open is not None:
        clauses.append(f"({entity.name} is {'open' if entity.is_open else 'closed'})")
    if entity.appliance and entity.powered_on is not None:
        clauses.append(f"({entity.name} is {'on' if entity.powered_on else 'off'})")
    for value, yes, no in ((entity.is_clean, "clean", "dirty"), (entity.is_hot, "hot", None), (entity.is_cold, "cold", None)):
        if value is True:
            clauses.append(f"({entity.name} is {yes})")
        elif value is False and no is not None:
            clauses.append(f"({entity.name} is {no})")
    return clauses


def describe_state(state: WorldState, relevant: Iterable[str], max_children: int = 6) -> str:
    """CMFR's clauses for the ``relevant`` entities of a privileged state (never reads a goal)."""
    clauses: list[str] = []
    names = [n for n in dict.fromkeys(relevant) if n in state.entities]
    for name in names:
        entity = state.entities[name]
        if entity.held:
            pass  # said once below
        elif entity.parent is not None:
            clauses.append(f"({name} {entity.relation or 'on'} {entity.parent})")
            # Whether its container is open decides a pick (CMFR appendix J: open the receptacle first), also
            # when the plan never named the container: a failed [Pick, bowl] then shows (kitchen_cabinet is
            # closed) beside (bowl in kitchen_cabinet). A named container says it in its own clauses.
            container = state.entities.get(entity.parent)
            if container is not None and container.name not in names and container.articulated \
                    and container.is_open is not None:
                clause = f"({container.name} is {'open' if container.is_open else 'closed'})"
                if clause not in clauses:
                    clauses.append(clause)
        elif entity.kind is EntityKind.OBJECT:
            clauses.append(f"({name} on the floor{' in ' + entity.room if entity.room else ''})")
        clauses.extend(_properties(entity))
        children = state.objects_in(name)
        if children and entity.kind is not EntityKind.ROOM:
            shown = children[:max_children] + (["others"] if len(children) > max_children else [])
            clauses.append(f"({name} contains {_join(shown)})")
    clauses.append(f"(agent holding {state.held or 'nothing'})")
    if state.robot_room:
        clauses.append(f"(agent in {state.robot_room})")
    return ", ".join(clauses)


def describe_from_text(description: str, relevant: Iterable[str], inventory: Sequence[str], max_lines: int = 12) -> str:
    """The lines of a world description (the world graph's text) that mention a relevant name, and the hand."""
    keys = [_words(n) for n in relevant if n.strip()]
    lines = []
    for line in description.splitlines():
        text = _words(line)
        if any(k in text for k in keys):
            lines.append(f"({line.strip()})")
        if len(lines) >= max_lines:
            break
    lines.append(f"(agent holding {', '.join(inventory) if inventory else 'nothing'})")
    return ", ".join(lines)

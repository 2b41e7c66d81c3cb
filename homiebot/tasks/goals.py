"""Goal specifications: what must hold in the final simulator state for a task to be done.

A goal is a conjunction of conditions (``GoalSpec.all``). Conditions select objects either by instance
name (``object``) or by category (``category``: a scene category such as ``apple``, an EMMOE alias such as
``red_box``, or a group such as ``fruit``), optionally restricted to where they stood at the start
(``from_``). The expert planner reads the same spec to decide what to do, so a goal is both the success
check and the plan's intent.

Process requirements that no final state shows ("check the fridge first") are ``inspected``
conditions: the furniture must have been open at some point of the episode (it started open or a
successful Open acted on it). Keypaths (appendix C.1) grade the process in detail; this is the coarse
state-level twin.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from homiebot.types import EntityKind, EntityState, WorldState

#: Category groups used by tasks ("all fruit", "food", "items"). Members are scene categories.
CATEGORY_GROUPS: dict[str, frozenset[str]] = {
    "fruit": frozenset({"apple", "banana", "lemon", "orange", "pear", "peach", "plum", "strawberry"}),
    "can": frozenset({"master_chef_can", "tomato_soup_can", "tuna_fish_can", "potted_meat_can"}),
    "box": frozenset({"cracker_box", "sugar_box", "pudding_box", "gelatin_box"}),
}
CATEGORY_GROUPS["food"] = CATEGORY_GROUPS["fruit"] | CATEGORY_GROUPS["can"] | CATEGORY_GROUPS["box"]


class _Cond(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Selector(_Cond):
    """Which objects a condition is about."""

    object: str | None = Field(None, description="one instance name")
    category: str | None = Field(None, description="category, alias or group (fruit, food, can, box, item)")
    from_: str | None = Field(None, alias="from", description="only objects that started on/in this receptacle")
    except_: list[str] = Field(default_factory=list, alias="except", description="categories to leave out")

    @model_validator(mode="after")
    def _one(self) -> Selector:
        if (self.object is None) == (self.category is None):
            raise ValueError("give exactly one of object / category")
        return self


class Placed(Selector):
    """Objects are on/in a receptacle. ``count``: at least that many (default 1); ``all``: every selected one.

    ``distinct``: the ``count`` must be met by objects of pairwise different categories ("fetch 3 different
    kinds of fruit": three fruit on the table that are not all apples).
    """

    type: Literal["placed"] = "placed"
    relation: Literal["on", "in"]
    receptacle: str
    count: int = Field(1, ge=1)
    all: bool = False
    distinct: bool = False

    @model_validator(mode="after")
    def _distinct_counts(self) -> Placed:
        if self.distinct and self.all:
            raise ValueError("distinct counts categories towards 'count'; it cannot be combined with 'all'")
        return self


class Count(Selector):
    """Exactly ``equals`` selected objects are on/in the receptacle ("keep the number of red boxes to 5")."""

    type: Literal["count"] = "count"
    relation: Literal["on", "in"]
    receptacle: str
    equals: int = Field(ge=0)


class Cleared(_Cond):
    """Nothing (except the listed categories) is left on/in the receptacle, and what was taken off it was put
    away: every object that started on/in it ends on/in some other receptacle.

    Decision (EMMOE's "clean up X" names no destination): an object dropped to the floor or still in the
    hand at the end has not been cleaned up, though X is empty; the keypaths (appendix C.1) likewise only
    accept items carried to a surface. Without this, a failed Put that lets the object fall would count
    as success for the tasks whose only condition is ``cleared``.
    """

    type: Literal["cleared"] = "cleared"
    receptacle: str
    except_: list[str] = Field(default_factory=list, alias="except")


class Articulation(_Cond):
    """A furniture's door or drawer ends closed (``state: closed``) or open."""

    type: Literal["articulation"] = "articulation"
    furniture: str
    state: Literal["open", "closed"]


class PoweredOff(_Cond):
    type: Literal["powered_off"] = "powered_off"
    furniture: str


class RobotIn(_Cond):
    """The robot ends in a room (or any room of a level, e.g. ``second_floor``)."""

    type: Literal["robot_in"] = "robot_in"
    room: str


class Holding(Selector):
    type: Literal["holding"] = "holding"


class Inspected(_Cond):
    """The furniture was open at some point of the episode (its contents were looked at)."""

    type: Literal["inspected"] = "inspected"
    furniture: str


Condition = Annotated[
    Placed | Count | Cleared | Articulation | PoweredOff | RobotIn | Holding | Inspected,
    Field(discriminator="type"),
]


class GoalSpec(_Cond):
    all: list[Condition] = Field(min_length=1)


# --------------------------------------------------------------------------------------------- evaluation


def matches_category(entity: EntityState, category: str) -> bool:
    """Whether ``entity`` answers to a goal's category word: a word for every object ("item", "anything"), a
    category group, its category, its name or one of its aliases."""
    key = category.strip().lower().replace(" ", "_")
    if key in ("item", "items", "anything", "everything", "object"):
        return entity.kind is EntityKind.OBJECT
    if key in CATEGORY_GROUPS:
        return entity.category in CATEGORY_GROUPS[key]
    aliases = {a.lower().replace(" ", "_") for a in entity.aliases}
    return key in (entity.category, entity.name) or key in aliases


def select(sel: Selector, initial: WorldState, current: WorldState) -> list[str]:
    """Instance names the selector designates (objects only), sorted."""
    names = []
    for name, ent in current.entities.items():
        if ent.kind is not EntityKind.OBJECT:
            continue
        if sel.object is not None and name != sel.object:
            continue
        if sel.category is not None and not matches_category(ent, sel.category):
            continue
        if any(matches_category(ent, c) for c in sel.except_):
            continue
        if sel.from_ is not None:
            start = initial.entities.get(name)
            if start is None or start.parent != sel.from_:
                continue
        names.append(name)
    return sorted(names)


def is_at(ent: EntityState, relation: str, receptacle: str) -> bool:
    """Whether ``ent`` rests ``relation`` (on/in) ``receptacle`` and is not in the robot's hand."""
    return ent.parent == receptacle and ent.relation == relation and not ent.held


def condition_holds(cond: Condition, initial: WorldState, final: WorldState, opened: Iterable[str] = ()) -> bool:
    """Whether one condition holds at the end of an episode. ``opened``: furniture opened during it."""
    if isinstance(cond, Placed):
        chosen = select(cond, initial, final)
        placed = [n for n in chosen if is_at(final.entities[n], cond.relation, cond.receptacle)]
        if cond.all:
            return len(chosen) > 0 and len(placed) == len(chosen)
        if cond.distinct:
            return len({final.entities[n].category for n in placed}) >= cond.count
        return len(placed) >= cond.count
    if isinstance(cond, Count):
        chosen = select(cond, initial, final)
        return sum(is_at(final.entities[n], cond.relation, cond.receptacle) for n in chosen) == cond.equals
    if isinstance(cond, Cleared):
        def concerned(e: EntityState) -> bool:
            return e.parent == cond.receptacle and not any(matches_category(e, c) for c in cond.except_)

        if any(concerned(e) for e in final.entities.values()):
            return False
        taken = [final.entities[n] for n, e in initial.entities.items() if concerned(e) and n in final.entities]
        return all(e.parent is not None and not e.held for e in taken)
    if isinstance(cond, Articulation):
        ent = final.entities[cond.furniture]
        return ent.is_open is (cond.state == "open")
    if isinstance(cond, PoweredOff):
        return final.entities[cond.furniture].powered_on is False
    if isinstance(cond, RobotIn):
        room = final.robot_room
        return room is not None and (room == cond.room or cond.room in final.entities[room].aliases)
    if isinstance(cond, Holding):
        return final.held is not None and final.held in select(cond, initial, final)
    if isinstance(cond, Inspected):
        return initial.entities[cond.furniture].is_open is True or cond.furniture in set(opened)
    raise TypeError(f"unknown condition {cond!r}")


def goal_satisfied(goal: GoalSpec, initial: WorldState, final: WorldState, opened: Iterable[str] = ()) -> bool:
    opened = set(opened)
    return all(condition_holds(c, initial, final, opened) for c in goal.all)


def unmet_conditions(goal: GoalSpec, initial: WorldState, final: WorldState, opened: Iterable[str] = ()) -> list[Condition]:
    opened = set(opened)
    return [c for c in goal.all if not condition_holds(c, initial, final, opened)]

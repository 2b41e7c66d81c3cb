"""ALFWorld-style names for the things of a scene: ``{type} {k}``, numbered from 1 per type.

ALFWorld's demangler (``alfworld.agents.environment.alfred_tw_env.AlfredDemangler``) names every AI2-THOR
object by its lower-cased type without separators and a per-type number (``countertop 1``, ``sinkbasin 1``,
``apple 2``). Our scenes' categories are snake_case and some differ from AI2-THOR's types, so a few are
mapped to the ALFRED type a text agent expects (a kitchen counter is a ``countertop``, a sink a
``sinkbasin``); the rest lose their underscores (``tuna_fish_can`` -> ``tunafishcan``). Numbers follow
the instance names' sorted order, so a scene always gets the same names. docs/textworld.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from homiebot.types import EntityKind, EntityState, WorldState, casefold_words

#: Our categories whose ALFRED type differs from the category without underscores.
ALFRED_TYPES: dict[str, str] = {
    "kitchen_counter": "countertop",
    "counter": "countertop",
    "sink": "sinkbasin",
    "kitchen_drawer": "drawer",
    "tv_stand": "tvstand",
    "tv": "television",
    "table": "sidetable",
    "fruit_bowl": "bowl",
}


def alfred_type(category: str) -> str:
    """The lower-case ALFRED type word of a category (``kitchen_counter`` -> ``countertop``)."""
    return ALFRED_TYPES.get(category, category.replace("_", "").replace(" ", "").lower())


def is_receptacle(entity: EntityState) -> bool:
    """Furniture a text agent can go to (ALFWorld lists every receptacle, sofas and armchairs included).
    Doors, stairs and landings are left out: ALFWorld's rooms have none."""
    return entity.kind is EntityKind.FURNITURE and entity.category not in ("door", "stairs", "landing")


@dataclass(frozen=True)
class NameTable:
    """Instance name <-> ALFWorld name, for the receptacles and objects of one scene."""

    to_text: dict[str, str]
    to_instance: dict[str, str]
    receptacles: tuple[str, ...]  # instance names, in the order of their text names
    objects: tuple[str, ...]

    @classmethod
    def from_state(cls, state: WorldState) -> NameTable:
        groups: dict[str, list[str]] = defaultdict(list)
        for name in sorted(state.entities):
            entity = state.entities[name]
            if entity.kind is EntityKind.OBJECT or is_receptacle(entity):
                groups[alfred_type(entity.category)].append(name)
        to_text: dict[str, str] = {}
        for word, names in groups.items():
            for k, name in enumerate(names, start=1):
                to_text[name] = f"{word} {k}"

        def order(name: str) -> tuple[str, int]:
            word, number = to_text[name].rsplit(" ", 1)
            return word, int(number)

        receptacles = tuple(sorted((n for n in to_text if state.entities[n].kind is EntityKind.FURNITURE), key=order))
        objects = tuple(sorted((n for n in to_text if state.entities[n].kind is EntityKind.OBJECT), key=order))
        return cls(to_text, {v: k for k, v in to_text.items()}, receptacles, objects)

    def text(self, instance: str) -> str:
        return self.to_text[instance]

    def instance(self, text: str) -> str | None:
        """The instance an ALFWorld name designates (case and spacing insensitive), or None."""
        return self.to_instance.get(casefold_words(text))

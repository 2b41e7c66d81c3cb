"""EMMOE's hand-written name map (``emmoe_name_dict.txt``): object model -> the names a planner may use for it.

The file (shipped in ``homiebot/perception/data/``, a verbatim copy of the EMMOE release's name dictionary) is a
sequence of blocks ``<model key>:`` followed by one line of ``/``-separated names (empty for models without
names). Keys are YCB ids (``005_tomato_soup_can``), ReplicaCAD assets (``frl_apartment_table_01``) or plain
names (``kitchen_counter``).

:func:`emmoe_aliases` finds the entries that describe a scene entity: the key with its numeric prefix,
``frl_apartment_`` and instance suffix removed must equal the entity's category (ignoring ``_`` and ``-``:
``tvstand`` is ``tv_stand``). When several entries share a category (three ReplicaCAD tables with different
names), only those with a name the entity already carries (its instance name or an alias) are used, so "yellow
table" is not claimed for a brown table.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from homiebot.types import EntityState

DEFAULT_PATH = Path(__file__).parent / "data" / "emmoe_name_dict.txt"

_PREFIX = re.compile(r"^(\d+(-[a-z])?_|frl_apartment_)")
_SUFFIX = re.compile(r"_\d+$")


class NameDictError(ValueError):
    """The name dictionary file is missing or malformed."""


def parse_name_dict(text: str, source: str = "<text>") -> dict[str, tuple[str, ...]]:
    entries: dict[str, tuple[str, ...]] = {}
    key: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.endswith(":") and "/" not in line:
            key = line[:-1].strip()
            if not key:
                raise NameDictError(f"{source}:{number}: empty key")
            entries.setdefault(key, ())
            continue
        if key is None:
            raise NameDictError(f"{source}:{number}: names before any '<key>:' line")
        names = tuple(dict.fromkeys(n.strip() for n in line.split("/") if n.strip()))
        entries[key] = tuple(dict.fromkeys(entries[key] + names))
    return entries


@lru_cache(maxsize=4)
def load_name_dict(path: str | Path = DEFAULT_PATH) -> dict[str, tuple[str, ...]]:
    path = Path(path)
    if not path.exists():
        raise NameDictError(f"EMMOE name dictionary not found: {path}")
    return parse_name_dict(path.read_text(), str(path))


def category_key(text: str) -> str:
    """Comparable form of a dictionary key or a category: ``005_tomato_soup_can`` -> ``tomatosoupcan``."""
    key = _SUFFIX.sub("", _PREFIX.sub("", text.strip().lower()))
    return re.sub(r"[\s_\-]+", "", key)


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.strip().lower())


def emmoe_aliases(entity: EntityState, names: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """The EMMOE names of ``entity`` (see the module docstring); empty when no entry describes it."""
    names = load_name_dict() if names is None else names
    wanted = category_key(entity.category)
    entries = [aliases for key, aliases in names.items() if aliases and category_key(key) == wanted]
    if len(entries) > 1:
        own = {_norm(entity.name), _norm(entity.category), *(_norm(a) for a in entity.aliases)}
        entries = [aliases for aliases in entries if own & {_norm(a) for a in aliases}]
    return tuple(dict.fromkeys(a for aliases in entries for a in aliases))

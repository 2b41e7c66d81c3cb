"""A parallel text world of every scene (ALFWorld's observations and commands from the simulator's state) and
the ALFWorld engine as a backend; docs/textworld.md.

* :mod:`.names`: ALFWorld names (``countertop 1``) for a scene's receptacles and objects;
* :mod:`.world`: :class:`TextWorld`, the text rendered from the simulator's state, admissible commands, and
  commands that run the simulator's skills, in ALFWorld 0.4's or the papers' phrasing.
"""

from homiebot.textworld.names import NameTable, alfred_type
from homiebot.textworld.world import NOTHING_HAPPENS, Phrasing, TextStep, TextWorld, join_things

__all__ = ["NOTHING_HAPPENS", "NameTable", "Phrasing", "TextStep", "TextWorld", "alfred_type", "join_things"]

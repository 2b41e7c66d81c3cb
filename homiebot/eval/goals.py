"""Deprecated: :mod:`homiebot.tasks.goals` under its old name, for one release.

The task and goal language moved below the planners (docs/architecture.md, "Layers"); this name stays for code
outside this repository that imports it (a planner of another package that reads the goal, as the expert does). Importing it warns once and gives the moved module itself, so
its attributes (and what a test patches on them) are the new module's. Import :mod:`homiebot.tasks.goals` instead.
"""

from __future__ import annotations

import sys
import warnings

from homiebot.tasks import goals as _moved
from homiebot.tasks.goals import *  # noqa: F403 - the moved module's names, for type checkers

warnings.warn(f"{__name__} is deprecated and goes in the next release: import homiebot.tasks.goals", DeprecationWarning,
              stacklevel=2)
sys.modules[__name__] = _moved

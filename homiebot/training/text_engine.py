"""Deprecated: :mod:`homiebot.planner.text_engine` under its old name, for one release.

The engine that plans with a trained folder is a planner runtime, so it moved below the training code that writes
the folder (docs/architecture.md, "Layers"); this name stays for code outside this repository that builds
``HFPlanner(engine=CausalTextModel(...))`` as docs/training.md showed it. Importing it warns once and gives the
moved module itself. Import :mod:`homiebot.planner.text_engine` instead.
"""

from __future__ import annotations

import sys
import warnings

from homiebot.planner import text_engine as _moved
from homiebot.planner.text_engine import *  # noqa: F403 - the moved module's names, for type checkers

warnings.warn(f"{__name__} is deprecated and goes in the next release: import homiebot.planner.text_engine",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved

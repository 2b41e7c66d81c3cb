"""Make the FakeWorld test double (``tests/agent/fake_world.py``) importable from this folder's tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "agent"))

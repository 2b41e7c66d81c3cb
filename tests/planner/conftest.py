"""Make ``plan_requests`` importable from this folder's tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # plan_requests

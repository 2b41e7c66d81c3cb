"""Make the shared example builders (``paper_examples``) importable from this folder's tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

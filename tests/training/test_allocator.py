"""The trainer's glibc settings (homiebot/training/allocator.py): a 4 MB block stays in the heap once the mmap
threshold is fixed at 8 MB, and is mmapped under glibc's default (128 KB) otherwise."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from homiebot.training.allocator import ENVIRONMENT_NAMES, apply_allocator_settings

_PROBE = """
import ctypes, ctypes.util, json, sys

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

line = None
if sys.argv[1] == "apply":
    from homiebot.training.allocator import apply_allocator_settings
    line = apply_allocator_settings()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
before = libc.mallinfo2().hblkhd
block = libc.malloc(4 * 1024 * 1024)
after = libc.mallinfo2().hblkhd
print(json.dumps({"mmapped": after - before, "line": line}))
"""


def _glibc_with_mallinfo2() -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    return hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallinfo2")


needs_glibc = pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc 2.33 or newer (mallinfo2)")


def _probe(mode: str, **environment: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_NAMES}
    env.update(environment)
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@needs_glibc
def test_a_fixed_threshold_keeps_a_four_megabyte_block_in_the_heap() -> None:
    default = _probe("leave")
    applied = _probe("apply")
    assert default["mmapped"] >= 4 * 1024 * 1024  # glibc's default threshold (128 KB) mmaps it
    assert applied["mmapped"] == 0
    assert applied["line"] == "allocator: glibc mmap threshold 8 MB, trim threshold 64 MB"


@needs_glibc
def test_settings_in_the_environment_are_left_as_the_user_set_them() -> None:
    given = _probe("apply", MALLOC_MMAP_THRESHOLD_="131072")
    assert given["mmapped"] >= 4 * 1024 * 1024
    assert given["line"] == "allocator: left as set in the environment (MALLOC_MMAP_THRESHOLD_)"


def test_the_line_says_what_was_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1")
    assert "MALLOC_TRIM_THRESHOLD_" in apply_allocator_settings()

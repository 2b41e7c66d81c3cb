"""glibc allocator settings for a long CPU training process.

Why: glibc serves blocks above its mmap threshold with mmap, and raises that threshold to the size of every mmapped
block freed (up to 32 MB; mallopt(3), M_MMAP_THRESHOLD). After the first long training sample, torch's activation
and gradient buffers of a few MB therefore come from the heap, which returns little to the system: the two SFT
processes grew to 8.7 GB resident within 5 steps and to 11-12 GB by step 74 (docs/results/trained-planner-2026-11-28.md).
A fixed threshold of 8 MB with a 64 MB trim threshold held them near 9.5 GB over pieces of 15-30 steps at 7 % system
time; a 256 KB threshold held 1.5-3.7 GB but spent 35-40 % of the CPU in the kernel zeroing fresh mappings.

Written here rather than taken from a library: the settings are one libc call each (``mallopt``), which no
maintained Python package wraps; ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` in the environment do the
same but only when set before the interpreter starts, which a ``homie train`` user should not have to know.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from dataclasses import dataclass

LOG = logging.getLogger(__name__)

# mallopt(3) parameter numbers, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

ENVIRONMENT_NAMES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


@dataclass(frozen=True)
class AllocatorSettings:
    """Fixed glibc thresholds in bytes (a fixed mmap threshold also stops glibc from raising it)."""

    mmap_threshold: int = 8 * 1024 * 1024
    trim_threshold: int = 64 * 1024 * 1024


def apply_allocator_settings(settings: AllocatorSettings | None = None) -> str:
    """Set glibc's thresholds in this process and say what was done, in one line for the log.

    Settings already given in the environment are left as the user set them; on a C library other than glibc
    (macOS, musl) nothing is changed."""
    settings = settings or AllocatorSettings()
    given = [name for name in ENVIRONMENT_NAMES if name in os.environ]
    if given:
        return f"allocator: left as set in the environment ({', '.join(given)})"
    libc = _glibc()
    if libc is None:
        return "allocator: not glibc, left as it is"
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success and 0 on an error (an out-of-range value).
    if (
        mallopt(_M_MMAP_THRESHOLD, settings.mmap_threshold) != 1
        or mallopt(_M_TRIM_THRESHOLD, settings.trim_threshold) != 1
    ):
        return "allocator: glibc refused the thresholds, left as it is"
    return (
        f"allocator: glibc mmap threshold {settings.mmap_threshold // 1024 // 1024} MB, "
        f"trim threshold {settings.trim_threshold // 1024 // 1024} MB"
    )


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    # gnu_get_libc_version exists in glibc only: the parameter numbers above are glibc's.
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None

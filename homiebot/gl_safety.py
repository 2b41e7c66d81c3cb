"""Keep one process from loading two LLVMs: Mesa's (software OpenGL) and triton's.

With ``MUJOCO_GL=egl`` on a machine without a GPU driver, the offscreen context is Mesa's llvmpipe, which
loads ``libLLVM``. ``triton`` (installed by the 'models' extra through xgrammar, and imported lazily by torch
and transformers while they load a model) carries its own LLVM; importing it after Mesa's is loaded segfaults
the process. Once Mesa's LLVM is in the process and triton is not, ``import triton`` is made to fail with
ModuleNotFoundError, which torch and transformers treat as "not installed" (their CPU paths need no triton).
Where triton was imported first, or where the GL driver is a GPU vendor's (no Mesa LLVM), nothing changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


class TritonBlocker(importlib.abc.MetaPathFinder):
    """Makes ``import triton`` fail cleanly (see the module docstring)."""

    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"{name} is blocked in this process: an OpenGL context is loaded", name=name)


def mesa_llvm_loaded() -> bool:
    """Whether Mesa's LLVM (llvmpipe's code generator) is mapped into this process."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    return "libLLVM" in maps


def _triton_installed() -> bool:
    try:
        importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def guard_triton_after_gl() -> bool:
    """Install the blocker if Mesa's LLVM is loaded and triton is installed but not imported. Idempotent;
    returns whether the blocker is in place."""
    if any(isinstance(f, TritonBlocker) for f in sys.meta_path):
        return True
    if "triton" in sys.modules or not _triton_installed() or not mesa_llvm_loaded():
        return False
    sys.meta_path.insert(0, TritonBlocker())
    log.info("Mesa's software OpenGL is loaded: 'import triton' is blocked in this process (it would segfault)")
    return True

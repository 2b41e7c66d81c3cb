"""Keep one process from loading two LLVMs: Mesa's (software OpenGL) and triton's.

With ``MUJOCO_GL=egl`` on a machine without a GPU driver, the offscreen context is Mesa's llvmpipe, which
loads ``libLLVM``. ``triton`` (installed by the 'models' extra through xgrammar, and imported lazily by torch
and transformers while they load a model) carries its own LLVM; importing it after Mesa's is loaded segfaults
the process. Once Mesa's LLVM is in the process and triton is not, ``sys.modules["triton"]`` is set to None:
``import triton`` then fails with ModuleNotFoundError and ``importlib.util.find_spec("triton")`` answers None, so
torch, transformers and trl treat triton as "not installed" (their CPU paths need no triton). A meta-path finder
that raised instead would also break those libraries' availability probes (trl imports its kernels module, which
asks transformers' ``is_triton_available``, and find_spec would raise there).
Where triton was imported first, or where the GL driver is a GPU vendor's (no Mesa LLVM), nothing changes.
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


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


def triton_blocked() -> bool:
    """Whether :func:`guard_triton_after_gl` blocked triton in this process."""
    return "triton" in sys.modules and sys.modules["triton"] is None


def guard_triton_after_gl() -> bool:
    """Block triton if Mesa's LLVM is loaded and triton is installed but not imported. Idempotent; returns whether
    triton is blocked."""
    if triton_blocked():
        return True
    if "triton" in sys.modules or not _triton_installed() or not mesa_llvm_loaded():
        return False
    # None, not a finder: the module docstring says why (typeshed types sys.modules without the None Python allows).
    sys.modules["triton"] = None  # type: ignore[assignment]
    log.info("Mesa's software OpenGL is loaded: 'import triton' is blocked in this process (it would segfault)")
    return True

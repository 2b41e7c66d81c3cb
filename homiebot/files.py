"""Permissions of what the commands write: the user's umask, as ``open`` and ``mkdir`` would apply it.

Everything that is written in place atomically goes through a private temporary (``tempfile.mkstemp`` makes
0600 files, ``tempfile.mkdtemp`` 0700 folders, for their own safety: see the ``tempfile`` documentation) and
is then renamed into place, so without a fix the records, bags and reports would keep those private modes.
:func:`publish` gives such a path the mode a plain ``open``/``mkdir`` would have given it under the umask.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

_UMASK_LINE = re.compile(r"^Umask:\s*([0-7]+)\s*$", re.MULTILINE)
_lock = threading.Lock()


def current_umask() -> int:
    """The process's umask, without changing it (Linux has it in /proc/self/status since 4.7, proc(5))."""
    try:
        found = _UMASK_LINE.search(Path("/proc/self/status").read_text())
    except OSError:
        found = None
    if found:
        return int(found.group(1), 8)
    # Elsewhere the only way to read it is to set it; set it straight back, under a lock for this process's
    # threads (another library doing the same at the same moment could still see the temporary value).
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def publish(path: str | os.PathLike[str]) -> None:
    """Give a file made by ``mkstemp`` (0600) or a folder made by ``mkdtemp`` (0700) the umask's mode."""
    target = Path(path)
    base = 0o777 if target.is_dir() else 0o666
    os.chmod(target, base & ~current_umask())

"""Process helpers shared by the evaluation workers and the ROS graph supervisor."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

#: ``PR_SET_PDEATHSIG`` from <linux/prctl.h>: the signal the kernel sends a process when its parent dies.
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals, parent_pid: int | None = None) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies, even by SIGKILL (prctl(2)).

    Callers choose the signal: evaluation workers take SIGKILL (an orphan must never move a record into
    place while the next run works on the same directory); ROS nodes take SIGTERM so that they can shut down
    their middleware cleanly. Safe between fork and exec (only ctypes and os calls); does nothing off Linux.

    ``parent_pid``: the pid this process was started by. The parent may have died before prctl took effect;
    then this process has been re-parented already and exits at once. (Comparing with the expected pid
    rather than with 1 keeps this right in a container where the parent itself is pid 1.)
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig))
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)

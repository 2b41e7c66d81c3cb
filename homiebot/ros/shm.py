"""Find and remove the shared-memory files that killed Fast DDS processes leave in ``/dev/shm``.

Fast DDS's shared-memory transport (both profiles of ``launch/config``: ``fastdds.xml`` names it, and
``fastdds_udp.xml`` keeps Fast DDS's default transports, which include it) gives every participant files in
``/dev/shm``, removed again when the participant closes. A process that dies without closing (SIGKILL from a
supervisor's escalation or a timeout test, a crash, the OOM killer) leaves them behind. Measured with the
Jazzy wheels (Fast DDS 2.14) and ``fastdds.xml``: one SIGKILLed rclpy node leaves 8 files holding 17.3 MiB
of memory (a 16 MiB and a 512 kiB segment with their ``_el`` locks, its unicast port with ``_el`` and
``sem.*_mutex``, one more port lock).

The files, by name (``<d>`` is Fast DDS's domain name, ``fastrtps``; Fast DDS 3 writes ``fastdds``):

* ``<d>_<16 hex>``: a participant's data segment; ``<d>_<16 hex>_el``: its lock file. The owner creates the
  lock file, takes an exclusive ``flock`` on it, then creates the segment, and holds the lock until it
  closes the segment (then it removes the segment, then the lock file). The kernel drops a ``flock`` when
  its holder dies, so an ``_el`` file nobody holds marks a dead owner.
* ``<d>_port<N>``: a port (a ring of buffer descriptors that writers push into, read by one listener, or by
  several); ``<d>_port<N>_el`` / ``_sl``: the listener's exclusive / shared lock, held the same way;
  ``sem.<d>_port<N>_mutex``: the named (POSIX) semaphore that serializes opening the port.

**Stale** is decided as Fast DDS's own cleaner (``fastdds shm clean``, ``tools/fastdds/shm/clean.py`` in
Fast DDS) decides a "zombie": a segment or port whose lock file exists and can be locked exclusively
(``flock(LOCK_EX | LOCK_NB)``) has no live holder; its files are removed. A lock file someone holds (a live
participant, shared holders included) keeps everything of its name. Three guards on top of that rule:

* the lock is taken on a file opened without creating or following anything, the name is checked to still
  point at the locked inode, and the lock is held while the files are unlinked, so a Fast DDS process that
  opens the same name at that moment fails its own lock (for a new segment it then draws another name);
* lock files younger than ``min_age_s`` are left alone (a creator opens the file, then locks it: a cleaner
  between the two would see it unlocked);
* ``flock`` locks belong to open file descriptions: our probe never releases a lock that a participant in
  this very process holds (POSIX ``fcntl`` record locks would: closing any descriptor of the file drops
  them, which is why this module never uses ``lockf``).

**Unowned** files have no lock file at all: a port whose listener closed cleanly while a writer of it was
killed (the writer's reference keeps the port alive), or a bare semaphore. Nothing tells whether a live
writer still maps one, so they are kept and reported, as Fast DDS's cleaner keeps them. They are small
(measured: 56 kiB a port with its semaphore) and bounded: a port's number derives from the domain and the
participant index, and Fast DDS reuses the port file of that number the next time.

Why our own code: ``fastdds shm clean`` ships with the ``fastdds`` command-line tool of a Fast DDS install,
which the PyPI ROS 2 wheels this project installs do not include (nor do they have a Python binding of Fast
DDS's SHM layer). The rule is small and documented above; it needs no ROS 2 at all.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import stat
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

#: Where Fast DDS keeps its shared memory on Linux (boost.interprocess maps ``shm_open`` names there).
DEFAULT_SHM_DIR = Path("/dev/shm")
#: Lock files younger than this are not judged (the window between a creator's open and its flock).
DEFAULT_MIN_AGE_S = 2.0

#: ``fastrtps_<16 hex>``, ``fastrtps_port<N>`` with an optional lock suffix, or ``sem.<...>_mutex``.
_NAME = re.compile(
    r"^(?P<sem>sem\.)?(?P<base>(?:fastrtps|fastdds)_(?:(?P<port>port\d{1,5})|[0-9a-f]{16}))(?P<suffix>_el|_sl|_mutex)?$"
)
_LOCK_SUFFIXES = ("_el", "_sl")
#: Fast DDS transport kinds of a profile that map /dev/shm (LARGE_DATA and DEFAULT include SHM).
_SHM_BUILTIN_TRANSPORTS = {"DEFAULT", "DEFAULTv6", "SHM", "LARGE_DATA", "LARGE_DATAv6"}
_FASTDDS_RMWS = {"rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"}


class ShmDirectoryError(FileNotFoundError):
    """The shared-memory directory to clean does not exist or is not a directory."""


class EntryState(str, Enum):
    IN_USE = "in use"  # a live process holds its lock file
    STALE = "stale"  # its lock file exists and nobody holds it: the owner died
    UNOWNED = "unowned"  # no lock file: nothing tells whether it is in use (Fast DDS's cleaner leaves these too)
    YOUNG = "young"  # a lock file younger than min_age_s: not judged yet
    UNKNOWN = "unknown"  # its lock file could not be probed (permissions): kept


@dataclass(frozen=True)
class ShmFile:
    path: Path
    allocated_bytes: int  # st_blocks * 512: what the file really holds (segments are sparse until written)
    size_bytes: int  # apparent size (st_size)


@dataclass(frozen=True)
class ShmEntry:
    """One segment or port with all its files (data, lock files, semaphore), and what was decided."""

    name: str  # e.g. fastrtps_0255ffb9415adf9f, fastrtps_port54161
    kind: Literal["segment", "port"]
    state: EntryState
    files: tuple[ShmFile, ...]
    reason: str = ""

    @property
    def allocated_bytes(self) -> int:
        return sum(f.allocated_bytes for f in self.files)


@dataclass(frozen=True)
class CleanReport:
    directory: Path
    dry_run: bool
    removed: tuple[ShmEntry, ...]  # stale entries: removed (in a dry run: to remove)
    in_use: tuple[ShmEntry, ...]  # a live process holds their lock file
    kept: tuple[ShmEntry, ...]  # not judged: unowned (no lock file), young, unknown
    errors: tuple[str, ...] = ()
    elapsed_s: float = 0.0

    @property
    def files_removed(self) -> tuple[Path, ...]:
        return tuple(f.path for entry in self.removed for f in entry.files)

    @property
    def bytes_freed(self) -> int:
        """Allocated bytes of the removed files (of the files to remove, in a dry run)."""
        return sum(entry.allocated_bytes for entry in self.removed)

    @property
    def files_in_use(self) -> tuple[Path, ...]:
        return tuple(f.path for entry in self.in_use for f in entry.files)

    def summary(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        return (f"{verb} {len(self.removed)} stale Fast DDS segments/ports ({len(self.files_removed)} files, "
                f"{self.bytes_freed / 2**20:.1f} MiB) in {self.directory}; {len(self.in_use)} in use, "
                f"{len(self.kept)} kept" + (f"; {len(self.errors)} errors" if self.errors else ""))


@dataclass
class _Group:
    name: str
    kind: Literal["segment", "port"]
    data: Path | None = None
    locks: list[Path] = field(default_factory=list)
    mutex: Path | None = None

    def paths(self) -> list[Path]:
        """Data first, the semaphore next, lock files last: the order in which they are unlinked."""
        return [p for p in (self.data, self.mutex) if p is not None] + sorted(self.locks)


def _regular_lstat(path: Path) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _scan(directory: Path) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            match = _NAME.match(entry.name)
            if match is None:
                continue
            sem, suffix = bool(match["sem"]), match["suffix"]
            if sem != (suffix == "_mutex"):  # "sem." goes with "_mutex" only; anything else is not Fast DDS's
                continue
            if not entry.is_file(follow_symlinks=False):  # never a symlink, a directory, ...
                continue
            name = match["base"]
            group = groups.setdefault(name, _Group(name, "port" if match["port"] else "segment"))
            path = directory / entry.name
            if suffix in _LOCK_SUFFIXES:
                group.locks.append(path)
            elif suffix == "_mutex":
                group.mutex = path
            else:
                group.data = path
    return groups


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path`` when nobody else holds one; None when
    someone does (or the name no longer points at the file we locked). FileNotFoundError when it is gone."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    locked, now = os.fstat(fd), _regular_lstat(path)
    if now is None or (now.st_dev, now.st_ino) != (locked.st_dev, locked.st_ino):
        os.close(fd)  # removed or replaced under us: somebody else is at work on it; leave it
        return None
    return fd


def _file_info(paths: Iterable[Path]) -> tuple[ShmFile, ...]:
    files = []
    for path in paths:
        st = _regular_lstat(path)
        if st is not None:
            files.append(ShmFile(path, st.st_blocks * 512, st.st_size))
    return tuple(files)


def _unlink(paths: Iterable[Path], errors: list[str]) -> tuple[ShmFile, ...]:
    """Unlink each path; return the files really removed (a file another cleaner removed first is skipped)."""
    removed = []
    for info in _file_info(paths):
        try:
            os.unlink(info.path)
        except FileNotFoundError:
            continue
        except OSError as err:
            errors.append(f"{info.path}: {err.strerror}")
            continue
        removed.append(info)
    return tuple(removed)


def _age_s(paths: Iterable[Path], now: float) -> float:
    mtimes = [st.st_mtime for st in map(_regular_lstat, paths) if st is not None]
    return now - max(mtimes) if mtimes else float("inf")


def clean_stale_segments(
    directory: str | os.PathLike[str] = DEFAULT_SHM_DIR,
    *,
    dry_run: bool = False,
    min_age_s: float = DEFAULT_MIN_AGE_S,
) -> CleanReport:
    """Remove the Fast DDS segments and ports in ``directory`` whose owner is dead (see the module docstring).

    ``dry_run``: decide, remove nothing (the report's ``removed`` lists what would go). Files that are not
    Fast DDS's (by name, or not regular files) and files without a lock file are never touched. Raises
    :class:`ShmDirectoryError` when ``directory`` does not exist or is not a directory.
    """
    started = time.monotonic()
    directory = Path(directory)
    if not directory.exists():
        raise ShmDirectoryError(f"shared-memory directory {directory} does not exist")
    if not directory.is_dir():
        raise ShmDirectoryError(f"shared-memory directory {directory} is not a directory")
    groups = _scan(directory)
    removed: list[ShmEntry] = []
    in_use: list[ShmEntry] = []
    kept: list[ShmEntry] = []
    errors: list[str] = []
    now = time.time()

    for name in sorted(groups):
        group = groups[name]
        if not group.locks:  # nothing to test: Fast DDS's cleaner leaves these too
            kept.append(ShmEntry(name, group.kind, EntryState.UNOWNED, _file_info(group.paths()), "no lock file"))
            continue
        if _age_s(group.locks, now) < min_age_s:
            kept.append(ShmEntry(name, group.kind, EntryState.YOUNG, _file_info(group.paths()),
                                 f"lock file younger than {min_age_s:g} s"))
            continue
        fds: list[int] = []
        try:
            holder: str | None = None
            unknown: str | None = None
            for lock in sorted(group.locks):
                try:
                    fd = _try_lock(lock)
                except FileNotFoundError:
                    continue  # closed (or cleaned) while we looked
                except OSError as err:
                    unknown = f"cannot probe {lock.name}: {err.strerror}"
                    break
                if fd is None:
                    holder = f"{lock.name} is locked by a live process"
                    break
                fds.append(fd)
            if holder is not None:
                in_use.append(ShmEntry(name, group.kind, EntryState.IN_USE, _file_info(group.paths()), holder))
                continue
            if unknown is not None:
                kept.append(ShmEntry(name, group.kind, EntryState.UNKNOWN, _file_info(group.paths()), unknown))
                continue
            if not fds:  # its owner closed it while we looked (it removes the lock file last)
                files = _file_info(group.paths())
                if files:
                    kept.append(ShmEntry(name, group.kind, EntryState.UNOWNED, files, "its lock file went away while we looked"))
                continue
            # Every lock file of the name is ours now: its owner is dead. Unlink while holding the locks.
            files = _file_info(group.paths()) if dry_run else _unlink(group.paths(), errors)
            removed.append(ShmEntry(name, group.kind, EntryState.STALE, files, "lock file not held by any process"))
        finally:
            for fd in fds:
                os.close(fd)

    report = CleanReport(directory, dry_run, tuple(removed), tuple(in_use), tuple(kept), tuple(errors),
                         time.monotonic() - started)
    log.debug("%s (%.1f ms)", report.summary(), report.elapsed_s * 1000)
    return report


def fastdds_uses_shm(env: Mapping[str, str]) -> bool:
    """Whether ROS 2 processes started with ``env`` use Fast DDS's shared-memory transport (and so may leave
    files in /dev/shm): the RMW is Fast DDS (Jazzy's default when unset), and neither
    ``FASTDDS_BUILTIN_TRANSPORTS`` nor the XML profile leaves shared memory out. Both of this project's
    profiles use it (``fastdds_udp.xml`` through Fast DDS's default transports)."""
    if env.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") not in _FASTDDS_RMWS:
        return False
    builtin = env.get("FASTDDS_BUILTIN_TRANSPORTS")
    profile = env.get("FASTRTPS_DEFAULT_PROFILES_FILE") or env.get("FASTDDS_DEFAULT_PROFILES_FILE")
    if not profile:
        return _builtin_has_shm(builtin)
    try:
        root = ET.parse(profile).getroot()
    except (OSError, ET.ParseError):
        return True  # cannot tell: assume the default transports, which include SHM
    elements = {(el.tag.rsplit("}", 1)[-1], (el.text or "").strip()) for el in root.iter()}
    if ("type", "SHM") in elements:  # a shared-memory transport descriptor
        return True
    if ("useBuiltinTransports", "false") in elements:
        return False
    return _builtin_has_shm(builtin)


def _builtin_has_shm(builtin: str | None) -> bool:
    """``FASTDDS_BUILTIN_TRANSPORTS`` (unset: DEFAULT, i.e. SHM and UDPv4); options follow a '?'."""
    return builtin is None or builtin.split("?", 1)[0].strip() in _SHM_BUILTIN_TRANSPORTS

"""Permissions of what the commands write: the user's umask, as ``open`` and ``mkdir`` would apply it.

Everything that is written in place atomically goes through a private temporary (``tempfile.mkstemp`` makes
0600 files, ``tempfile.mkdtemp`` 0700 folders, for their own safety: see the ``tempfile`` documentation) and
is then renamed into place, so without a fix the records, bags and reports would keep those private modes.
:func:`publish` gives such a path the mode a plain ``open``/``mkdir`` would have given it under the umask, and
:func:`atomic_write_text` / :func:`atomic_write_json` are the one atomic writer every module uses.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

# libyaml's C parser when PyYAML was built with it: about 7x faster than the pure-Python SafeLoader on the 465 kB
# PARTNR suite, which every command that resolves a task id parses; both build the same plain objects and raise
# the same yaml.YAMLError classes with line and column marks.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with the fastest safe loader this PyYAML has."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader, chosen above


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


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` so that readers see the old file or the whole new one, never part of it,
    also after a power cut: a temporary file in the same folder, flushed and fsync'ed, given the umask's mode
    (:func:`publish`), then renamed over ``path`` (``os.replace`` is atomic within one file system). The temporary
    file is removed on any failure. The folder is created when missing. Returns the path written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        publish(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """:func:`atomic_write_text` of ``data`` as JSON (with a final newline)."""
    return atomic_write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")


def read_json_lines(path: str | os.PathLike[str], what: str = "a JSON object") -> list[Any]:
    """Every non-blank line of a JSON-lines file, parsed; a line that is not JSON raises ``ValueError`` naming
    ``path:line`` and ``what`` the line should have been."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise ValueError(f"{path}:{number}: not {what}") from None
    return out

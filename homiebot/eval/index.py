"""``results.jsonl``, an evaluation's append-only index of finished episodes (layout: :mod:`homiebot.eval.runner`).

The index is derived, never trusted: metrics read the records. Only the parent process appends, one line
per ``write`` + ``fsync``; a kill can leave a torn last line (dropped on the next start) or a record with no
line (re-added with ``"recovered": true``). Readers de-duplicate by (kind, task, run).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from homiebot.data.record import read_summary
from homiebot.eval.manifest import INDEX_FILE, Job, is_finished

log = logging.getLogger(__name__)


def read_index(out_dir: Path) -> dict[str, dict[str, Any]]:
    """The index lines by job key (later lines win; torn or foreign lines are skipped)."""
    path = out_dir / INDEX_FILE
    entries: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return entries
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            entries[f"{entry['kind']}:{entry['task_id']}:{entry['run']}"] = entry
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return entries


def _repair_index_tail(path: Path) -> None:
    """Drop a torn last line (a kill during its write): keep everything up to the last newline."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("dropped a torn last line of %s", path)


class IndexWriter:
    """Append-only writer of ``results.jsonl``: one ``write`` per line, then ``fsync``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _repair_index_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # the umask takes its part, as for open()

    def append(self, entry: dict[str, Any]) -> None:
        data = (json.dumps(entry, sort_keys=True) + "\n").encode()
        os.write(self._fd, data)
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def recover_index(out: Path, jobs: Sequence[Job], index: IndexWriter) -> None:
    """Add index lines for records that a killed run finished but did not index."""
    indexed = read_index(out)
    for job in jobs:
        if job.key not in indexed and is_finished(out / job.relpath()):
            summary = read_summary(out / job.relpath())
            index.append(
                {
                    "kind": job.kind,
                    "task_id": job.task_id,
                    "run": job.run,
                    "rounds": summary.get("num_rounds"),
                    "ended": summary.get("ended"),
                    "goal_satisfied": summary.get("goal_satisfied"),
                    "error": summary.get("error"),
                    "recovered": True,
                }
            )

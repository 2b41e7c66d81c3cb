"""``homie data export``: episode records in EMMOE-100's raw layout (EMMOE paper, appendix B.3).

``RAW/<split>/<task>_run<r>/info.txt`` (:func:`homiebot.training.emmoe.info_text`) beside the round's views
``subtaskN_{front,left,back,right}.png`` (hard links, else copies), which is what appendix F.1's conversion
script reads. Written into a temp folder and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from homiebot.files import publish
from homiebot.training.build import check_out_dir
from homiebot.training.emmoe import info_text
from homiebot.training.episodes import load_episodes


def export_raw(runs: Sequence[str | Path], out: str | Path, split: str = "train") -> int:
    """Export every successful episode of ``split`` under ``runs``; returns how many."""
    target = check_out_dir(Path(out))
    episodes = load_episodes(runs, split=split).episodes
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        publish(tmp)
        for episode in episodes:
            folder = tmp / episode.split / episode.key
            folder.mkdir(parents=True)
            (folder / "info.txt").write_text(info_text(episode), encoding="utf-8")
            for source in (p for r in episode.rounds for p in r.images):
                try:
                    os.link(source, folder / Path(source).name)
                except OSError:
                    shutil.copyfile(source, folder / Path(source).name)
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(episodes)

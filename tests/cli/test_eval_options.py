"""``homie eval`` takes the planner options ``homie run`` takes (``--base-url``, ``--model``, ...) as well as
``-p key=value``; both end up as the same pinned planner options in eval.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HOMIE = str(Path(sys.executable).with_name("homie"))


def _eval(out: Path, *options: str) -> subprocess.CompletedProcess:
    argv = [HOMIE, "eval", "--suite", "emmoe", "--tasks", "emmoe-084", "--runs", "1", "--workers", "1",
            "--planner", "openai", "--no-progress", "--no-report", "--out", str(out), *options]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def test_named_planner_options_equal_dash_p(tmp_path: Path) -> None:
    # Port 9 (discard) has no server: the episode cannot run, which is all this test needs (nothing is stored).
    named = _eval(tmp_path / "named", "--base-url", "http://127.0.0.1:9/v1", "--model", "nobody", "--no-constrained")
    dash_p = _eval(tmp_path / "dash_p", "-p", "base_url=http://127.0.0.1:9/v1", "-p", "model=nobody", "-p",
                   "constrained=false")
    for done in (named, dash_p):
        assert done.returncode == 1, done.stderr[-2000:]
        assert "could not run: cannot reach the OpenAI-compatible server at http://127.0.0.1:9/v1" in done.stderr
    pinned = [json.loads((tmp_path / name / "eval.json").read_text())["settings"]["planner_options"]
              for name in ("named", "dash_p")]
    assert pinned[0] == pinned[1] == {"base_url": "http://127.0.0.1:9/v1", "model": "nobody", "constrained": False}


def test_progress_keeps_total_and_times_at_80_columns(tmp_path: Path) -> None:
    """The bar's row is short enough for 80 columns (count, done/succeeded, elapsed, eta), and the expert
    reference runs PLWSR needs are counted as such, not as the planner's episodes."""
    import re

    argv = [HOMIE, "eval", "--suite", "demo", "--runs", "1", "--workers", "1", "--noise", "emmoe", "--no-report",
            "--out", str(tmp_path / "eval")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout + done.stderr
    header = re.search(r"jobs \((\d+) episodes \+ (\d+) expert references\)", text)
    assert header and header.group(1) == header.group(2), text[-2000:]
    total = int(header.group(1)) * 2
    rows = [line for line in text.splitlines() if line.startswith("eval ") and "eta" in line]
    assert rows, text[-2000:]
    assert len(rows[-1]) <= 80
    assert re.search(rf"\b{total}/{total} done, \d+ succeeded \d+:\d\d:\d\d eta \d+:\d\d:\d\d", rows[-1]), rows[-1]

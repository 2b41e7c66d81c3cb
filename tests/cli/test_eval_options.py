"""``homie eval`` takes the planner options ``homie run`` takes (``--base-url``, ``--model``, ...) as well as
``-p key=value``; both end up as the same pinned planner options in eval.json."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HOMIE = str(Path(sys.executable).with_name("homie"))


def _eval(out: Path, *options: str) -> subprocess.CompletedProcess:
    argv = [HOMIE, "eval", "--suite", "emmoe", "--tasks", "emmoe-084", "--runs", "1", "--workers", "1",
            "--planner", "openai", "--no-progress", "--no-report", "--out", str(out), *options]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


@contextlib.contextmanager
def _models_only_server() -> Iterator[str]:
    """An OpenAI-compatible address that lists one model (so the start-up check passes) and refuses every chat
    request with HTTP 400 (so no episode runs, which is all this test needs: nothing is stored)."""

    from homiebot.testing.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer(lambda body: 400, model="nobody")
    try:
        yield server.url
    finally:
        server.close()


@pytest.mark.slow
def test_named_planner_options_equal_dash_p(tmp_path: Path) -> None:
    with _models_only_server() as url:
        named = _eval(tmp_path / "named", "--base-url", url, "--model", "nobody", "--no-constrained")
        dash_p = _eval(tmp_path / "dash_p", "-p", f"base_url={url}", "-p", "model=nobody", "-p", "constrained=false")
    for done in (named, dash_p):
        assert done.returncode == 1, done.stderr[-2000:]
        assert f"could not run: the server at {url} answered HTTP 400" in done.stderr, done.stderr[-2000:]
    pinned = [json.loads((tmp_path / name / "eval.json").read_text())["settings"]["planner"]
              for name in ("named", "dash_p")]
    assert pinned[0] == pinned[1]
    assert {key: pinned[0][key] for key in ("name", "base_url", "model", "constrained")} == {
        "name": "openai", "base_url": url, "model": "nobody", "constrained": False}


@pytest.mark.slow
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

"""SIGTERM ends a ``homie`` command the way Ctrl-C does: its cleanup runs, one line, exit 130 (docs/cli.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer

from homiebot.cli.failures import EXIT_INTERRUPTED, guard_command, sigterm_as_interrupt


def test_a_guarded_command_killed_with_sigterm_cleans_up_and_exits_130() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned: list[str] = []

    def command() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
            raise AssertionError("SIGTERM did not interrupt the command")
        finally:
            cleaned.append("staging removed")

    with pytest.raises(typer.Exit) as ended:
        guard_command(command)()
    assert ended.value.exit_code == EXIT_INTERRUPTED and cleaned == ["staging removed"]
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back


def test_a_forked_worker_still_dies_of_sigterm_at_once() -> None:
    # multiprocessing's fork start method copies the handler into its workers; terminating one must still end it.
    with sigterm_as_interrupt():
        child = os.fork()
        if child == 0:  # the worker
            try:
                time.sleep(30)
            finally:
                os._exit(3)  # reached only if SIGTERM became an exception in the child
        time.sleep(0.2)
        os.kill(child, signal.SIGTERM)
        _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


@pytest.mark.slow
def test_skill_recording_killed_with_sigterm_leaves_no_folder(tmp_path: Path) -> None:
    pytest.importorskip("lerobot", reason="lerobot is not importable (needs Python >= 3.12: docs/skill-data.md)")
    out = tmp_path / "runs" / "pick"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from homiebot.cli import main; main()", "data", "skills", "--skill", "pick",
         "-n", "50", "--size", "32", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 120
    while not any((tmp_path / "runs").glob(".pick.tmp-*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    time.sleep(1.0)  # inside the recording
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "interrupted" in err.strip().splitlines()[-1]
    assert not (tmp_path / "runs").exists()  # the folder the command made, staging and all, is gone

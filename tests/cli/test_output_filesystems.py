"""What the commands write, on file systems that refuse it, and with which permissions (docs/cli.md, "Errors
and exit codes"): a read-only ``--out`` is bad input (exit 2) for every command that writes, a disk that fills
up during ``homie run`` is the environment (exit 1); either way one ``error:`` line, no traceback, nothing
half-written. Ctrl-C in ``homie eval`` is one line with the resume command. Records and renders take the
user's umask.

The read-only and full file systems are real: small tmpfs mounts (``mount -t tmpfs``), so these tests need
root (or CAP_SYS_ADMIN) and skip with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from homiebot.types import VIEW_NAMES

HOMIE = str(Path(sys.executable).with_name("homie"))


def _mount_tmpfs(target: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``target``; the reason it could not be mounted, or None."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(target)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"mount is not available: {err}"
    if done.returncode != 0:
        return f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}"
    return None


@pytest.fixture()
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: room for a summary, not for an episode's views and video."""
    mount_point = tmp_path / "small"
    reason = _mount_tmpfs(mount_point, "64k")
    if reason:
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


@pytest.fixture()
def read_only_fs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "ro"
    reason = _mount_tmpfs(mount_point, "1m")
    if reason:
        pytest.skip(reason)
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True, timeout=30)
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


def _homie(*args: str, cwd: Path, umask: int | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([HOMIE, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--task", "demo-drawer", "--no-render", "--out"],
        ["eval", "--suite", "demo", "--runs", "1", "--out"],
        ["sim", "render", "--scene", "apartment_1", "--out"],
        ["up", "sim", "--task", "demo-drawer", "--out"],
    ],
    ids=["run", "eval", "sim-render", "up-sim"],
)
@pytest.mark.slow
def test_read_only_out_is_one_line_exit_2(read_only_fs: Path, tmp_path: Path, argv: list[str]) -> None:
    done = _homie(*argv, str(read_only_fs / "out"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert [line for line in done.stderr.splitlines() if line.strip()] == _error_lines(done.stderr)
    assert len(_error_lines(done.stderr)) == 1 and "Read-only file system" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert list(read_only_fs.iterdir()) == []


@pytest.mark.slow
def test_full_disk_during_run_is_one_line_exit_1(small_fs: Path, tmp_path: Path) -> None:
    done = _homie("run", "--task", "demo-drawer", "--out", str(small_fs / "out"), cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    errors = _error_lines(done.stderr)
    assert len(errors) == 1 and errors[0].startswith("error: no space left on the device"), done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert list(small_fs.iterdir()) == []  # the temporary record was removed, nothing half-written


@pytest.mark.slow
def test_eval_interrupt_is_one_line_with_the_resume_command(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    argv = [HOMIE, "eval", "--suite", "emmoe", "--runs", "1", "--workers", "2", "--out", str(out)]
    # A session of its own, signalled as a whole: Ctrl-C in a terminal reaches the command and its workers.
    # Started through a shim that restores SIGINT's default action before exec: a test runner started in the
    # background by a shell without job control ignores SIGINT, every child inherits that (POSIX), and the
    # command would then run to its end.
    shim = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    process = subprocess.Popen([sys.executable, "-c", shim, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path, start_new_session=True, env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 240
    index = out / "results.jsonl"
    while time.monotonic() < deadline and not (index.is_file() and index.read_text().count("\n") >= 2):
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("error: interrupted; to resume, run the same command again: homie eval --suite emmoe")
    assert str(out) in lines[0] and "Traceback" not in stderr + stdout
    done_before = index.read_text().count("\n")
    assert 2 <= done_before < 100  # kept, and not the whole suite


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_records_and_renders_follow_the_umask(tmp_path: Path, umask: int) -> None:
    record = tmp_path / "record"
    done = _homie("run", "--task", "demo-drawer", "--no-video", "--out", str(record), cwd=tmp_path, umask=umask)
    assert done.returncode == 0, done.stderr[-2000:]
    render = tmp_path / "render"
    done = _homie("sim", "render", "--scene", "apartment_1", "--size", "64", "--map-size", "64", "--out", str(render),
                  cwd=tmp_path, umask=umask)
    assert done.returncode == 0, done.stderr[-2000:]
    for root in (record, render):
        assert stat.S_IMODE(root.stat().st_mode) == 0o777 & ~umask, root
        for path in root.rglob("*"):
            wanted = (0o777 if path.is_dir() else 0o666) & ~umask
            assert stat.S_IMODE(path.stat().st_mode) == wanted, path


@pytest.mark.slow
def test_render_saves_the_raw_instance_ids(tmp_path: Path) -> None:
    out = tmp_path / "render"
    done = _homie("sim", "render", "--scene", "apartment_1", "--size", "96", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    names = json.loads((out / "instances.json").read_text())
    for view in VIEW_NAMES:
        ids = np.asarray(Image.open(out / f"{view}_seg_ids.png"))
        colours = np.asarray(Image.open(out / f"{view}_seg.png").convert("RGB"))
        assert ids.shape == colours.shape[:2] and ids.dtype == np.uint16
        present = set(np.unique(ids).tolist()) - {0}
        assert present and present <= {int(k) for k in names}, (view, present)
        # Same partition of the picture: one colour per id (the colour image is the id image painted).
        for instance in present:
            assert len(np.unique(colours[ids == instance].reshape(-1, 3), axis=0)) == 1
        assert (colours[ids == 0] == 0).all()

"""Stale Fast DDS shared-memory files (homiebot.ros.shm, `homie ros clean-shm`, the `homie up` start-up hook).

Most checks run on a temporary directory with files named as Fast DDS names them and locks held the way Fast
DDS holds them (an exclusive or shared ``flock`` on the ``_el`` / ``_sl`` file), by another process or by
this one. The last test (marker ``ros``) runs real rclpy processes over the shared-memory transport and
cleans the real /dev/shm while they run and after one of them was SIGKILLed.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from homiebot.ros import shm
from homiebot.ros.shm import EntryState, ShmDirectoryError, clean_stale_segments, fastdds_uses_shm

SEGMENT = "fastrtps_0123456789abcdef"
PORT = "fastrtps_port54161"
OLD = time.time() - 3600


def _make(directory: Path, name: str, data: bytes = b"", mtime: float = OLD) -> Path:
    path = directory / name
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def _stale_segment(directory: Path, name: str = SEGMENT, size: int = 64 * 1024) -> list[Path]:
    """A segment as a SIGKILLed participant leaves it: the data (partly written, sparse) and its lock file."""
    data = directory / name
    with open(data, "wb") as f:
        f.truncate(size)
        f.write(b"x" * 8192)
    os.utime(data, (OLD, OLD))
    return [data, _make(directory, f"{name}_el")]


def _stale_port(directory: Path, name: str = PORT) -> list[Path]:
    return [_make(directory, name, b"p" * 4096), _make(directory, f"{name}_el"), _make(directory, f"sem.{name}_mutex", b"s" * 32)]


def _hold(path: Path, shared: bool = False) -> subprocess.Popen:
    """Another process that holds a flock on ``path`` (as a live Fast DDS participant holds its lock file)."""
    code = textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(path)!r}, os.O_RDONLY)
        fcntl.flock(fd, fcntl.{'LOCK_SH' if shared else 'LOCK_EX'} | fcntl.LOCK_NB)
        print("locked", flush=True)
        time.sleep(120)
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


# ------------------------------------------------------------------------------------- the rule, in a temp dir


def test_stale_segment_and_port_are_removed_with_their_companions(tmp_path):
    files = _stale_segment(tmp_path) + _stale_port(tmp_path)
    allocated = sum(os.lstat(p).st_blocks * 512 for p in files)

    report = clean_stale_segments(tmp_path)

    assert {e.name for e in report.removed} == {SEGMENT, PORT}
    assert all(e.state is EntryState.STALE for e in report.removed)
    assert sorted(report.files_removed) == sorted(files)
    assert not any(p.exists() for p in files)
    assert report.bytes_freed == allocated  # allocated blocks, not the sparse segment's apparent size
    assert report.bytes_freed < sum(f.size_bytes for e in report.removed for f in e.files)
    assert report.in_use == () and report.errors == ()


def test_segment_locked_by_a_live_process_is_kept(tmp_path):
    live = _stale_segment(tmp_path)  # same files; the holder below makes them a live participant's
    dead = _stale_segment(tmp_path, "fastrtps_fedcba9876543210")
    holder = _hold(live[1])
    try:
        report = clean_stale_segments(tmp_path)
        assert [e.name for e in report.in_use] == [SEGMENT]
        assert "locked by a live process" in report.in_use[0].reason
        assert set(report.files_in_use) == set(live)
        assert all(p.exists() for p in live)
        assert [e.name for e in report.removed] == ["fastrtps_fedcba9876543210"]
        assert not any(p.exists() for p in dead)
    finally:
        _stop(holder)
    # the holder is dead now: the kernel dropped its lock, the segment is stale
    assert [e.name for e in clean_stale_segments(tmp_path).removed] == [SEGMENT]


def test_shared_lock_holders_keep_a_port(tmp_path):
    files = _make(tmp_path, PORT, b"p"), _make(tmp_path, f"{PORT}_sl"), _make(tmp_path, f"sem.{PORT}_mutex")
    holder = _hold(files[1], shared=True)
    try:
        report = clean_stale_segments(tmp_path)
        assert [e.name for e in report.in_use] == [PORT] and report.removed == ()
        assert all(p.exists() for p in files)
    finally:
        _stop(holder)


def test_a_lock_held_in_this_process_is_respected_and_not_released(tmp_path):
    """flock locks belong to open file descriptions: a participant of the cleaning process keeps its segment,
    and our probe (another descriptor of the same file) does not drop its lock when it closes."""
    data, lock = _stale_segment(tmp_path)
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert [e.name for e in clean_stale_segments(tmp_path).in_use] == [SEGMENT]
        probe = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # still locked by `fd`
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
        assert data.exists() and lock.exists()
    finally:
        os.close(fd)


def test_dry_run_removes_nothing(tmp_path):
    files = _stale_segment(tmp_path) + _stale_port(tmp_path)
    before = {p: p.read_bytes() for p in files}

    report = clean_stale_segments(tmp_path, dry_run=True)

    assert report.dry_run and {e.name for e in report.removed} == {SEGMENT, PORT}
    assert sorted(report.files_removed) == sorted(files) and report.bytes_freed > 0
    assert {p: p.read_bytes() for p in files} == before


def test_foreign_files_are_never_touched(tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("not Fast DDS's")
    foreign = [
        _make(tmp_path, "lttng-ust-wait-6"),
        _make(tmp_path, "fastrtps_notahexname_el"),
        _make(tmp_path, f"{SEGMENT}.bak"),
        _make(tmp_path, f"{SEGMENT}_el.old"),
        _make(tmp_path, "fastrtps_0123456789ABCDEF_el"),  # Fast DDS writes lower-case hex
        _make(tmp_path, f"{PORT}_mutex"),  # a mutex without "sem." is not a Linux named semaphore
        _make(tmp_path, f"sem.{PORT}"),
        _make(tmp_path, "myapp_el"),
        _make(tmp_path, "sem.myapp_mutex"),
    ]
    (tmp_path / "fastrtps_fedcba9876543210").mkdir()  # a directory with a segment's name
    (tmp_path / "fastrtps_fedcba9876543210_el").symlink_to(outside)  # a symlink with a lock file's name
    (tmp_path / "fastrtps_1111111111111111_el").symlink_to(outside)

    report = clean_stale_segments(tmp_path)

    assert report.removed == () and report.in_use == ()
    assert all(p.exists() for p in foreign)
    assert (tmp_path / "fastrtps_fedcba9876543210").is_dir()
    assert (tmp_path / "fastrtps_fedcba9876543210_el").is_symlink() and outside.read_text() == "not Fast DDS's"
    outside.unlink()


def test_young_lock_files_and_files_without_a_lock_are_kept(tmp_path):
    young = [_make(tmp_path, SEGMENT, b"x"), _make(tmp_path, f"{SEGMENT}_el", mtime=time.time())]
    unowned = [_make(tmp_path, PORT, b"p"), _make(tmp_path, f"sem.{PORT}_mutex", b"s")]  # no _el: Fast DDS keeps it too

    report = clean_stale_segments(tmp_path)

    assert report.removed == ()
    assert {(e.name, e.state) for e in report.kept} == {(SEGMENT, EntryState.YOUNG), (PORT, EntryState.UNOWNED)}
    assert all(p.exists() for p in young + unowned)
    assert [e.name for e in clean_stale_segments(tmp_path, min_age_s=0).removed] == [SEGMENT]
    assert all(p.exists() for p in unowned)


def test_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ShmDirectoryError, match=f"{tmp_path / 'absent'} does not exist"):
        clean_stale_segments(tmp_path / "absent")
    (tmp_path / "file").write_text("")
    with pytest.raises(ShmDirectoryError, match="is not a directory"):
        clean_stale_segments(tmp_path / "file")


# -------------------------------------------------------------------------------------------------- the CLI


def test_cli_clean_shm(tmp_path):
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    runner, app = CliRunner(), build_app()
    result = runner.invoke(app, ["ros", "clean-shm", "--dir", str(tmp_path / "absent")])
    assert result.exit_code == 2
    assert f"error: shared-memory directory {tmp_path / 'absent'} does not exist" in result.output

    files = _stale_segment(tmp_path) + _stale_port(tmp_path)
    result = runner.invoke(app, ["ros", "clean-shm", "--dir", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "would remove 2 stale" in result.output
    assert all(p.exists() for p in files)

    result = runner.invoke(app, ["ros", "clean-shm", "--dir", str(tmp_path), "--list"])
    assert result.exit_code == 0, result.output
    assert "removed 2 stale Fast DDS segments/ports (5 files" in result.output
    assert not any(p.exists() for p in files)


# ------------------------------------------------------------------------------------------- the start-up hook


def test_fastdds_uses_shm_for_both_profiles():
    config = Path(__file__).parents[2] / "launch" / "config"
    assert fastdds_uses_shm({"FASTRTPS_DEFAULT_PROFILES_FILE": str(config / "fastdds.xml")})
    assert fastdds_uses_shm({"FASTRTPS_DEFAULT_PROFILES_FILE": str(config / "fastdds_udp.xml")})  # default transports
    assert fastdds_uses_shm({})
    assert not fastdds_uses_shm({"FASTDDS_BUILTIN_TRANSPORTS": "UDPv4"})
    assert not fastdds_uses_shm({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"})


def test_supervisor_cleans_stale_segments_once_at_start(tmp_path, monkeypatch, caplog):
    from homiebot.ros.supervisor import GraphSpec, NodeSpec, Supervisor

    monkeypatch.setattr(Supervisor, "_spawn", lambda self, process: None)  # no node processes needed here
    params = tmp_path / "params.yaml"
    params.write_text("{}\n")
    graph = GraphSpec(nodes=[NodeSpec(name="fake", package="p", executable="e", module="m")])
    shm_dir = tmp_path / "shm"
    shm_dir.mkdir()

    files = _stale_segment(shm_dir)
    other_rmw = Supervisor(graph, params, env={"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}, shm_dir=shm_dir)
    other_rmw.start()
    assert all(p.exists() for p in files)  # no Fast DDS, no cleaning

    supervisor = Supervisor(graph, params, env={"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}, shm_dir=shm_dir)
    with caplog.at_level("INFO", logger="homiebot.ros.supervisor"):
        supervisor.start()
    assert not any(p.exists() for p in files)
    assert "removed 1 stale Fast DDS segments/ports (2 files" in caplog.text

    Supervisor(graph, params, env={}, shm_dir=tmp_path / "absent").start()  # a missing dir never fails the start


# ---------------------------------------------------------------------------- real Fast DDS processes (rclpy)

_NODE = """
import sys, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node("shm_probe_" + sys.argv[1])
if sys.argv[1] == "pub":
    publisher = node.create_publisher(String, "/shm_probe", 10)
    node.create_timer(0.05, lambda: publisher.publish(String(data="x" * 4096)))
else:
    node.create_subscription(String, "/shm_probe", lambda msg: print("got", flush=True), 10)
print("ready", flush=True)
rclpy.spin(node)
"""


def _held_lock_files(pid: int, shm_dir: Path) -> set[str]:
    """Names of the Fast DDS lock files a process holds open (Fast DDS keeps each one open while it holds it)."""
    names = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith(f"{shm_dir}/") and target.endswith(("_el", "_sl")):
            names.add(Path(target).name)
    return names


def _files_of(lock_names: set[str], shm_dir: Path) -> set[Path]:
    files = set()
    for lock in lock_names:
        base = lock[:-3]
        files |= {p for p in (shm_dir / base, shm_dir / lock, shm_dir / f"sem.{base}_mutex") if p.exists()}
    return files


@pytest.mark.ros
def test_live_participants_are_kept_and_a_killed_ones_files_are_removed(ros_domain, tmp_path):
    if not sys.platform.startswith("linux") or not shm.DEFAULT_SHM_DIR.is_dir():
        pytest.skip("Fast DDS keeps its shared memory in /dev/shm on Linux only")
    from homiebot.testing.ros_helpers import graph_environment

    env = graph_environment(ros_domain)
    assert fastdds_uses_shm(env)
    script = tmp_path / "node.py"
    script.write_text(_NODE)
    shm_dir = shm.DEFAULT_SHM_DIR.resolve()
    logs = {role: tmp_path / f"{role}.log" for role in ("pub", "sub")}
    processes = {}
    for role in ("pub", "sub"):
        with open(logs[role], "w") as log:
            processes[role] = subprocess.Popen([sys.executable, str(script), role], env=env, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)

    def received() -> int:
        return logs["sub"].read_text().count("got")

    def wait_for(predicate, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not predicate():
            time.sleep(0.1)
        return predicate()

    try:
        assert wait_for(lambda: received() >= 5, 60), {r: p.read_text() for r, p in logs.items()}
        locks = {role: _held_lock_files(p.pid, shm_dir) for role, p in processes.items()}
        assert all(any(n.startswith("fastrtps_") and "_port" not in n for n in names) for names in locks.values()), locks
        files = {role: _files_of(names, shm_dir) for role, names in locks.items()}
        time.sleep(shm.DEFAULT_MIN_AGE_S + 0.5)  # older than the young-file guard: judged, not skipped

        # While both run: a dry run and a real clean of the real /dev/shm keep every file of theirs.
        for dry_run in (True, False):
            report = clean_stale_segments(shm_dir, dry_run=dry_run)
            in_use = {e.name for e in report.in_use}
            removed = {e.name for e in report.removed}
            for role, names in locks.items():
                assert {n[:-3] for n in names} <= in_use, (role, names, report.summary())
                assert not {n[:-3] for n in names} & removed
                assert all(p.exists() for p in files[role]), role
        count = received()
        assert wait_for(lambda: received() >= count + 5, 20)  # and they still talk over it
        assert all(p.poll() is None for p in processes.values())

        # SIGKILL the publisher: what it held is stale now, and goes; the subscriber's stays.
        processes["pub"].send_signal(signal.SIGKILL)
        processes["pub"].wait(timeout=10)
        assert any(p.exists() for p in files["pub"])  # a SIGKILL leaves its files behind
        report = clean_stale_segments(shm_dir)  # its lock files are older than the young-file guard
        removed = {e.name: e for e in report.removed}
        segments = {n[:-3] for n in locks["pub"] if "_port" not in n}
        assert segments <= set(removed), report.summary()  # ports the subscriber's Fast DDS may reset itself
        assert sum(removed[s].allocated_bytes for s in segments) > 0
        assert not any(p.exists() for p in files["pub"])
        assert {n[:-3] for n in locks["sub"]} <= {e.name for e in report.in_use}
        assert all(p.exists() for p in files["sub"]) and processes["sub"].poll() is None
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        clean_stale_segments(shm_dir)  # what the test's own processes left (older than the guard by now)

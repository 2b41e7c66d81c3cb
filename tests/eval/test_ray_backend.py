"""``homie eval --backend ray``: the same directory, the same results as the local backend, and resumable by it.

The record transport (pack on the actor, place on the driver) and the refusals need no Ray; the evaluations
start a private Ray instance (``ray.init``, a few seconds) and run the two-task ``demo`` suite like
tests/eval/test_runner.py, whose local results they are compared with.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from homiebot.eval.ray_backend import check_ray, pack_record, place_record, ray_missing
from homiebot.eval.runner import INDEX_FILE, EvalError, EvalSettings, read_index, run_evaluation

# The expert under EMMOE's execution noise: outcomes depend on the seeds, and each episode has its reference.
NOISY = EvalSettings(suite="demo", planner="expert", noise="emmoe")
HOMIE = [str(Path(sys.executable).with_name("homie"))]
needs_ray = pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing()))


def _report(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    report.pop("plots", None)
    return report


def _rounds(out: Path) -> dict[str, list[dict]]:
    """Every record's rounds without their timings (the deterministic content of the records)."""
    found = {}
    for path in sorted(out.glob("*/*/run*/rounds.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row.pop("timings_s")
        found[str(path.relative_to(out))] = rows
    return found


def _index_keys(out: Path) -> list[str]:
    lines = [json.loads(line) for line in (out / INDEX_FILE).read_text().splitlines()]
    return [f"{e['kind']}:{e['task_id']}:{e['run']}" for e in lines]


# ------------------------------------------------------------------------------------ without Ray


def test_a_record_travels_whole_and_is_placed_once(tmp_path: Path) -> None:
    source = tmp_path / "scratch" / "run0"
    (source / "views").mkdir(parents=True)
    (source / "summary.json").write_text('{"ok": true}')
    (source / "views" / "r0_front.png").write_bytes(bytes(range(256)) * 4)
    data = pack_record(source)
    target = tmp_path / "out" / "episodes" / "t" / "run0"
    assert place_record(data, target)
    assert (target / "summary.json").read_text() == '{"ok": true}'
    assert (target / "views" / "r0_front.png").read_bytes() == bytes(range(256)) * 4
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp directory left
    (target / "summary.json").write_text('{"first": true}')
    assert not place_record(data, target)  # a second copy of a finished record is dropped
    assert (target / "summary.json").read_text() == '{"first": true}'


def test_a_half_directory_without_summary_is_replaced(tmp_path: Path) -> None:
    source = tmp_path / "s"
    source.mkdir()
    (source / "summary.json").write_text("{}")
    target = tmp_path / "t"
    target.mkdir()
    (target / "rounds.jsonl").write_text("torn")
    assert place_record(pack_record(source), target)
    assert sorted(p.name for p in target.iterdir()) == ["summary.json"]


def test_refusals_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "never"
    with pytest.raises(EvalError, match="use local or ray"):
        run_evaluation(NOISY, out, backend="spark", progress=False)
    with pytest.raises(EvalError, match="--address needs --backend ray"):
        run_evaluation(NOISY, out, address="auto", progress=False)
    if ray_missing() is None:
        with pytest.raises(EvalError, match="HOST:PORT"):
            check_ray("no-port")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(EvalError, match=r"the 'ray' extra"):
        run_evaluation(NOISY, out, backend="ray", progress=False)
    assert not out.exists()


@pytest.mark.slow
def test_cli_without_ray_says_how_to_get_it(tmp_path: Path) -> None:
    # A child whose `import ray` fails, whether or not Ray is installed here.
    code = (
        "import sys; sys.modules['ray'] = None; sys.argv = ['homie'] + sys.argv[1:];"
        "from homiebot.cli import main; main()"
    )
    out = tmp_path / "e"
    proc = subprocess.run([sys.executable, "-c", code, "eval", "--suite", "demo", "--backend", "ray", "--out", str(out)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "pip install -e '.[ray]'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


# ------------------------------------------------------------------------------------- with Ray


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The local backend's result: the noisy expert (episodes + noiseless references), 2 tasks x 2 runs."""
    out = tmp_path_factory.mktemp("local")
    outcome = run_evaluation(NOISY, out, runs=2, workers=2, progress=False)
    assert outcome.finished == outcome.total == 8 and not outcome.failed_jobs
    return out


@needs_ray
@pytest.mark.slow
def test_ray_gives_the_local_results(tmp_path: Path, local_run: Path) -> None:
    outcome = run_evaluation(NOISY, tmp_path, runs=2, workers=2, progress=False, backend="ray")
    assert (outcome.finished, outcome.skipped, outcome.failed_jobs) == (8, 0, []), outcome.failed_jobs[:1]
    assert _report(tmp_path) == _report(local_run)
    assert _rounds(tmp_path) == _rounds(local_run)
    index = read_index(tmp_path)
    assert len(index) == 8 and sorted(_index_keys(tmp_path)) == sorted(_index_keys(local_run))
    assert all(entry.get("worker_node") for entry in index.values())  # run by Ray actors
    assert not list(tmp_path.glob("*/*/.*tmp-*"))
    # Resuming the finished directory with the local backend runs nothing.
    again = run_evaluation(NOISY, tmp_path, runs=2, workers=1, progress=False)
    assert (again.finished, again.skipped) == (0, 8)


@needs_ray
@pytest.mark.slow
def test_local_run_killed_halfway_then_resumed_on_ray(tmp_path: Path, local_run: Path) -> None:
    out = tmp_path / "mixed"
    command = [*HOMIE, "eval", "--suite", "demo", "--planner", "expert", "--noise", "emmoe", "--runs", "2", "--workers", "2",
               "--out", str(out), "--no-progress"]
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    index = out / INDEX_FILE
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if index.exists() and len(index.read_text().splitlines()) >= 4:  # half of the 8 jobs
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the local run ended before it could be killed halfway"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = len(list(out.glob("*/*/run*/summary.json")))
    assert 4 <= before < 8
    resumed = subprocess.run([*command, "--backend", "ray"], env=env, check=False, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{8 - before} episode(s) run, {before} already done" in resumed.stdout
    assert _report(out) == _report(local_run)
    assert _rounds(out) == _rounds(local_run)
    keys = _index_keys(out)
    assert len(keys) == len(set(keys)) == 8  # every episode exactly once
    ray_rows = [e for e in read_index(out).values() if e.get("worker_node")]
    assert len(ray_rows) == 8 - before


@needs_ray
@pytest.mark.slow
def test_a_worker_killed_mid_episode_is_replaced_without_a_duplicate_row(tmp_path: Path, local_run: Path) -> None:
    import psutil

    out = tmp_path / "killed-worker"
    command = [*HOMIE, "eval", "--suite", "demo", "--planner", "expert", "--noise", "emmoe", "--runs", "2",
               "--workers", "2", "--backend", "ray", "--no-report", "--out", str(out), "--no-progress"]
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 240
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        # Ray titles a worker process after what it runs: "ray::EpisodeActor.run" is one inside an episode.
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                if "ray::EpisodeActor.run" in " ".join(child.cmdline()):
                    child.kill()
                    killed = child.pid
                    break
            except psutil.Error:
                continue
        time.sleep(0.02)
    stdout, stderr = proc.communicate(timeout=400)
    assert killed is not None, "no worker was seen inside an episode"
    assert proc.returncode == 0, stderr[-3000:]
    assert "Ray worker lost running" in stderr
    keys = _index_keys(out)
    assert len(keys) == len(set(keys)) == 8  # the lost episode ran again, once
    assert _report(out) == _report(local_run)
    assert _rounds(out) == _rounds(local_run)

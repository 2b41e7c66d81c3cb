"""The evaluation runner on the real embedded simulator: parallel runs, resume, crash safety, refusals.

Uses the two-task ``demo`` suite (apartment_1) so that every evaluation takes seconds. The SIGKILL test
starts ``homie eval`` as a subprocess in its own process group, kills the whole group at a random point,
reruns the same command, and compares the final report with an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from homiebot.eval.runner import (
    INDEX_FILE,
    EvalError,
    EvalSettings,
    compute_scores,
    eval_lock,
    read_index,
    run_evaluation,
    write_eval_report,
)

pytestmark = pytest.mark.slow

EXPERT = EvalSettings(suite="demo", planner="expert")
RANDOM = EvalSettings(suite="demo", planner="random")
HOMIE = [str(Path(sys.executable).with_name("homie"))]


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


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the random baseline (episodes + expert references), 2 tasks x 2 runs, 2 workers."""
    out = tmp_path_factory.mktemp("uninterrupted")
    outcome = run_evaluation(RANDOM, out, runs=2, workers=2, progress=False)
    assert outcome.finished == outcome.total == 8 and not outcome.failed_jobs
    return out


def test_expert_evaluation_succeeds_and_metrics_recompute(tmp_path: Path) -> None:
    outcome = run_evaluation(EXPERT, tmp_path, runs=2, workers=2, progress=False)
    assert (outcome.total, outcome.finished, outcome.skipped) == (4, 4, 0)
    report = _report(tmp_path)
    assert report["table2"]["sr"] == 1.0 and report["table2"]["plwsr"] == 1.0 and report["table2"]["n"] == 4
    assert report["setting"]["expert_reference"] == "self"
    assert sorted(read_index(tmp_path)) == sorted(
        f"episode:{t}:{r}" for t in ("demo-drawer", "demo-green-can") for r in (0, 1)
    )
    # ``homie metrics`` recomputes the same figures from the records alone.
    (tmp_path / "report.json").unlink()
    (tmp_path / INDEX_FILE).unlink()
    write_eval_report(tmp_path)
    assert _report(tmp_path)["table2"] == report["table2"]
    # Running the same evaluation again runs nothing.
    again = run_evaluation(EXPERT, tmp_path, runs=2, workers=2, progress=False)
    assert (again.finished, again.skipped) == (0, 4)


def test_resume_after_partial_run_matches_uninterrupted(tmp_path: Path, uninterrupted: Path) -> None:
    # One worker, one run first; then the full command: only the missing episodes run.
    first = run_evaluation(RANDOM, tmp_path, runs=1, workers=1, progress=False)
    assert first.finished == 4
    second = run_evaluation(RANDOM, tmp_path, runs=2, workers=2, progress=False)
    assert (second.finished, second.skipped) == (4, 4)
    assert _report(tmp_path) == _report(uninterrupted)
    assert _rounds(tmp_path) == _rounds(uninterrupted)


def test_crash_leftovers_are_repaired(tmp_path: Path, uninterrupted: Path) -> None:
    """What a kill can leave: a half-written record (temp dir), a record missing from the index, a torn line."""
    shutil.copytree(uninterrupted, tmp_path / "ev")
    out = tmp_path / "ev"
    # 1. a record that was being written: only its temp directory exists.
    victim = out / "episodes" / "demo-drawer" / "run1"
    victim.rename(out / "episodes" / "demo-drawer" / ".run1.tmp-crashed")
    # 2. a record whose index line was never written, and 3. a torn last line.
    lines = (out / INDEX_FILE).read_text().splitlines(keepends=True)
    kept = [line for line in lines if '"demo-green-can"' not in line or '"reference"' in line]
    (out / INDEX_FILE).write_text("".join(kept) + '{"kind": "episode", "task_id": "demo-gr')
    outcome = run_evaluation(RANDOM, out, runs=2, workers=2, progress=False)
    assert (outcome.finished, outcome.skipped) == (1, 7)
    assert not list(out.glob("episodes/*/.*tmp-*"))
    index = read_index(out)
    assert len(index) == 8
    assert sum(1 for e in index.values() if e.get("recovered")) == 2  # the two green-can episodes
    raw_lines = (out / INDEX_FILE).read_text().splitlines()
    assert all(json.loads(line) for line in raw_lines)  # the torn line is gone, every line parses
    assert _report(out) == _report(uninterrupted)


def test_sigkill_at_a_random_point_then_rerun_gives_identical_metrics(tmp_path: Path, uninterrupted: Path) -> None:
    out = tmp_path / "killed"
    command = [*HOMIE, "eval", "--suite", "demo", "--planner", "random", "--runs", "2", "--workers", "2",
               "--out", str(out), "--no-progress"]
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    rng = random.Random()
    seed = rng.randrange(1_000_000)
    rng = random.Random(seed)
    kill_after = rng.randrange(0, 7)  # index lines to wait for (0..6 of 8 episodes) ...
    extra_delay = rng.uniform(0.0, 0.6)  # ... then a little more, to land inside an episode
    proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    index = out / INDEX_FILE
    while time.monotonic() < deadline and proc.poll() is None:
        if index.exists() and len(index.read_text().splitlines()) >= kill_after:
            break
        time.sleep(0.02)
    time.sleep(extra_delay)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    finished_before = len(list(out.glob("*/*/run*/summary.json")))
    print(f"kill seed {seed}: killed={killed} after {finished_before} finished episodes")
    rerun = subprocess.run(command, env=env, check=False, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{8 - finished_before} episode(s) run, {finished_before} already done" in rerun.stdout, (seed, rerun.stdout)
    assert _report(out) == _report(uninterrupted), f"kill seed {seed} (killed={killed}, after {finished_before})"
    assert _rounds(out) == _rounds(uninterrupted)
    assert len(read_index(out)) == 8


def test_worker_count_does_not_change_results(tmp_path: Path, uninterrupted: Path) -> None:
    run_evaluation(RANDOM, tmp_path, runs=2, workers=1, progress=False)
    assert _report(tmp_path) == _report(uninterrupted)


def test_refusals(tmp_path: Path, uninterrupted: Path) -> None:
    with pytest.raises(EvalError, match="another setting"):
        run_evaluation(EXPERT, uninterrupted, runs=1, workers=1, progress=False)
    with pytest.raises(EvalError, match="unknown task"):
        run_evaluation(EXPERT, tmp_path / "x", task_ids=["nope"], progress=False)
    with pytest.raises(ValueError, match="unknown planner"):  # the setting itself does not validate
        EvalSettings(suite="demo", planner="nope")
    with pytest.raises(EvalError, match="workers"):
        run_evaluation(EXPERT, tmp_path / "z", workers=0, progress=False)
    with eval_lock(tmp_path / "locked"), pytest.raises(EvalError, match="another evaluation"):
        run_evaluation(EXPERT, tmp_path / "locked", progress=False)
    with pytest.raises(EvalError, match="no evaluation"):
        compute_scores(tmp_path / "empty")


def test_cli_exit_codes(tmp_path: Path) -> None:
    bad = subprocess.run([*HOMIE, "eval", "--suite", "demo", "--noise", "loud", "--out", str(tmp_path)],
                         check=False, capture_output=True, text=True)
    assert bad.returncode == 2 and "noise" in bad.stderr
    missing = subprocess.run([*HOMIE, "metrics", str(tmp_path / "none")], check=False, capture_output=True, text=True)
    assert missing.returncode == 2 and "not a directory" in missing.stderr
    split = subprocess.run([*HOMIE, "eval", "--suite", "demo", "--split", "val", "--out", str(tmp_path / "s")],
                           check=False, capture_output=True, text=True)
    assert split.returncode == 2 and "split" in split.stderr


def test_perception_setting_runs_episodes_through_the_world_graph(tmp_path: Path) -> None:
    settings = EvalSettings(suite="demo", planner="expert", perception="conceptgraph")
    assert not settings.self_reference  # L* comes from the expert without perception
    assert settings.label() == "expert planner, noise off, perception conceptgraph"
    outcome = run_evaluation(settings, tmp_path, runs=1, workers=1, progress=False)
    assert outcome.finished == outcome.total == 4 and not outcome.failed_jobs  # 2 episodes + 2 references
    report = _report(tmp_path)
    assert report["setting"]["perception"] == "conceptgraph"
    assert "perception conceptgraph" in (tmp_path / "report.md").read_text()
    for summary in (tmp_path / "episodes").glob("*/run0/summary.json"):
        assert json.loads(summary.read_text())["success"] is True
    # episodes render (the graph is built from the views); the references do not use perception
    assert list((tmp_path / "episodes").glob("*/run0/rounds.jsonl"))
    with pytest.raises(EvalError, match="perception: 'conceptgraph' there, 'off' now"):
        run_evaluation(EvalSettings(suite="demo", planner="expert"), tmp_path, runs=1, workers=1, progress=False)


def test_directories_started_before_a_setting_existed_resume_with_its_default(tmp_path: Path) -> None:
    run_evaluation(EXPERT, tmp_path, runs=1, workers=1, task_ids=["demo-drawer"], progress=False)
    manifest = json.loads((tmp_path / "eval.json").read_text())
    del manifest["settings"]["perception"]  # as written before `perception` was a setting
    (tmp_path / "eval.json").write_text(json.dumps(manifest))
    outcome = run_evaluation(EXPERT, tmp_path, runs=1, workers=1, progress=False)
    assert outcome.skipped == 1 and outcome.finished == 1


def test_cli_rejects_an_unknown_perception(tmp_path: Path) -> None:
    bad = subprocess.run([*HOMIE, "eval", "--suite", "demo", "--perception", "x-ray", "--out", str(tmp_path / "p")],
                         check=False, capture_output=True, text=True)
    assert bad.returncode == 2 and "perception" in bad.stderr
    assert not (tmp_path / "p").exists()

"""A command checks its whole configuration before it writes anything (docs/cli.md, "Checked before anything is
written"): planner options by name and type, the planner's server, a Ray cluster, the output folder. A refused or
failed start leaves no file and no pinned setting behind, so that the corrected command then runs in the same folder.

The per-command refusals (exit 2, one line, nothing written) are cases of tests/cli/test_failures.py; here are the
ones that need a second command (the corrected one), a server that is down (exit 1), and the typing itself.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homiebot.cli import build_app
from homiebot.cli.failures import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, classify, user_path
from homiebot.config import DecodeMode
from homiebot.planner.registry import PlannerError, parse_planner_options, planner_options
from tests.cli.test_failures import _leaf_commands

HOMIE = str(Path(sys.executable).with_name("homie"))
#: The quick corrected evaluation: one task, one run, the expert (its own PLWSR reference), one worker.
QUICK_EVAL = ["--tasks", "emmoe-001", "--planner", "expert", "--runs", "1", "--workers", "1", "--no-progress",
              "--no-report"]


def _homie(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.run([HOMIE, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def _stderr_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def _free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assert_refused(done: subprocess.CompletedProcess, code: int, *words: str) -> None:
    lines = _stderr_lines(done)
    assert done.returncode == code, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert all(word in lines[0] for word in words), lines[0]
    assert "Traceback" not in done.stdout + done.stderr


# ------------------------------------------------------------------------------ homie eval: nothing pinned


@pytest.mark.parametrize(
    ("typo", "words"),
    [
        (["-p", "foo=bar"], ["option(s) foo", "it takes: interact_range_m"]),
        (["-p", "near_threshold_m=near"], ["near_threshold_m=near must be a number"]),
    ],
)
@pytest.mark.slow
def test_a_typo_does_not_lock_the_evaluation_folder(tmp_path: Path, typo: list[str], words: list[str]) -> None:
    refused = _homie(tmp_path, "eval", "--tasks", "emmoe-001", *typo, "--out", "e1")
    _assert_refused(refused, EXIT_BAD_INPUT, *words)
    assert not (tmp_path / "e1").exists()
    corrected = _homie(tmp_path, "eval", *QUICK_EVAL, "--out", "e1")
    assert corrected.returncode == 0, corrected.stderr[-2000:]
    assert "1 episode(s) run" in corrected.stdout


@pytest.mark.slow
def test_a_server_that_is_down_does_not_lock_the_evaluation_folder(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    url = f"http://127.0.0.1:{_free_port()}/v1"
    down = _homie(tmp_path, "eval", "--tasks", "emmoe-001", "--planner", "openai", "--base-url", url,
                  "--model", "my-vlm", "--out", "e1")
    _assert_refused(down, EXIT_ENVIRONMENT, f"cannot reach the OpenAI-compatible server at {url}", "--base-url")
    assert not (tmp_path / "e1").exists()
    corrected = _homie(tmp_path, "eval", *QUICK_EVAL, "--out", "e1")
    assert corrected.returncode == 0, corrected.stderr[-2000:]


@pytest.mark.slow
def test_a_ray_cluster_that_is_not_there_stops_the_evaluation_before_it_writes(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{_free_port()}"
    (tmp_path / "e1").mkdir()  # an empty folder the user made stays empty
    done = _homie(tmp_path, "eval", *QUICK_EVAL, "--backend", "ray", "--address", address, "--out", "e1")
    _assert_refused(done, EXIT_ENVIRONMENT, f"cannot reach the Ray cluster at --address {address}")
    assert list((tmp_path / "e1").iterdir()) == []
    assert "n/a" not in done.stdout  # no table of an evaluation that never ran


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["absent", "empty"])
def test_a_failed_start_removes_what_it_made(tmp_path: Path, folder: str) -> None:
    """Workers that cannot start (here: a model folder that looks like one, with a config.json, but whose model type
    no library knows: found only by loading it) are a failed start, not a run: the evaluation folder is left as it
    was, and the corrected setting runs there."""
    from homiebot.eval.runner import EvalSettings, WorkerSetupError, run_evaluation

    out = tmp_path / "e1"
    if folder == "empty":
        out.mkdir()
    model = tmp_path / "not-a-model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "no-such-model-type"}')
    broken = EvalSettings(planner="hf", planner_options={"model": str(model)})
    with pytest.raises(WorkerSetupError, match="a worker could not start"):
        run_evaluation(broken, out, runs=1, workers=1, task_ids=["emmoe-001"], progress=False, report=False)
    assert (list(out.iterdir()) == []) if folder == "empty" else not out.exists()
    outcome = run_evaluation(EvalSettings(), out, runs=1, workers=1, task_ids=["emmoe-001"], progress=False,
                             report=False)
    assert outcome.finished == 1 and not outcome.failed_jobs


# ------------------------------------------------------------------------------ homie run: no round table, no record


@pytest.mark.slow
def test_run_with_its_server_down_prints_and_writes_nothing(tmp_path: Path) -> None:
    """The README's free-text command with no server behind --base-url: one line, exit 1, no table, no record."""
    pytest.importorskip("openai")
    url = f"http://127.0.0.1:{_free_port()}/v1"
    down = _homie(tmp_path, "run", "put the apple in the fridge", "--scene", "apartment_1", "--planner", "openai",
                  "--base-url", url, "--model", "my-vlm", "--out", "free")
    _assert_refused(down, EXIT_ENVIRONMENT, f"cannot reach the OpenAI-compatible server at {url}")
    assert down.stdout == ""
    assert list(tmp_path.iterdir()) == []  # neither the record nor a temporary beside it
    corrected = _homie(tmp_path, "run", "--task", "demo-drawer", "--no-render", "--no-report", "--out", "free")
    assert corrected.returncode == 0, corrected.stderr[-2000:]


# ------------------------------------------------------------------------------ homie up sim: no run folder, no node


@pytest.mark.parametrize("agents", ["robot", "robot+human"])
def test_up_sim_with_its_server_down_starts_nothing(tmp_path: Path, agents: str) -> None:
    """The graph's planner (or, with two agents, the human's) on a server that is down: one line, exit 1, before the
    run folder is made and any node starts (the ROS overlay is not even looked for)."""
    pytest.importorskip("openai")
    url = f"http://127.0.0.1:{_free_port()}/v1"
    who = ["--task", "emmoe-001", "--planner", "openai"] if agents == "robot" else [
        "--task", "partnr-1-022", "--partner-planner", "openai"]
    down = _homie(tmp_path, "up", "sim", *who, "--base-url", url, "--model", "my-vlm", "--out", "X")
    _assert_refused(down, EXIT_ENVIRONMENT, f"cannot reach the OpenAI-compatible server at {url}")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ the suite's expert


def test_run_plays_the_suites_expert_on_a_partnr_task(tmp_path: Path) -> None:
    """--planner expert (like no --planner) on a PARTNR-style task is partnr_expert, as in homie eval: the goal expert
    cannot switch or clean (docs/partnr.md, "The PARTNR expert")."""
    import json

    for planner in (["--planner", "expert"], []):
        done = _homie(tmp_path, "run", "--task", "partnr-1-022", *planner, "--no-render", "--no-video", "--no-report",
                      "--out", "r")
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads((tmp_path / "r" / "summary.json").read_text())
        assert summary["planner"] == "partnr_expert"
        assert summary["verdict"]["judged_by"] == "partnr" and summary["verdict"]["pc"] == 1.0
    emmoe = _homie(tmp_path, "run", "--task", "demo-drawer", "--planner", "expert", "--no-render", "--no-video",
                   "--no-report", "--out", "e")
    assert emmoe.returncode == 0, emmoe.stderr[-2000:]
    assert json.loads((tmp_path / "e" / "summary.json").read_text())["planner"] == "expert"


# ------------------------------------------------------------------------------ option values typed


def test_option_values_are_typed_from_the_configuration() -> None:
    assert planner_options("openai", {"constrained": "yes", "temperature": "0.5", "max_tokens": "24", "seed": "null",
                                      "image_detail": "low", "model": "123"}) == {
        "constrained": True, "temperature": 0.5, "max_tokens": 24, "image_detail": "low", "model": "123"}
    assert planner_options("hf", {"model": "m", "share_prefix": "0", "decode": "fast", "quantization": "none"}) == {
        "model": "m", "share_prefix": False, "decode": DecodeMode.FAST}
    assert planner_options("scripted", {"outputs": '["a", "b"]'}) == {"outputs": ["a", "b"]}
    # Values already typed (a Python caller, or eval.json's pinned options in a worker) pass unchanged.
    assert planner_options("hf", {"model": "m", "max_new_tokens": 12, "do_sample": False}) == {
        "model": "m", "max_new_tokens": 12, "do_sample": False}


@pytest.mark.parametrize(
    ("planner", "option", "expected"),
    [
        ("hf", "max_new_tokens=abc", "max_new_tokens=abc must be an integer"),
        ("hf", "share_prefix=maybe", "share_prefix=maybe must be a yes/no value (true/1/yes or false/0/no)"),
        ("openai", "constrained=maybe", "constrained=maybe must be a yes/no value"),
        ("openai", "temperature=hot", "temperature=hot must be a number"),
        ("openai", "image_detail=huge", "image_detail=huge must be one of low, high, auto"),
        ("hf_partnr", "foo=1", "does not take option(s) foo; it takes: model, adapter"),  # through its base class
    ],
)
def test_bad_option_values_are_refused(planner: str, option: str, expected: str) -> None:
    with pytest.raises(PlannerError) as raised:
        planner_options(planner, {"model": "m", **parse_planner_options([option])})
    assert expected in str(raised.value)


def test_a_malformed_option_is_a_planner_error() -> None:
    with pytest.raises(PlannerError, match="must look like key=value"):
        parse_planner_options(["=x"])
    assert parse_planner_options(["a=1", "b=x=y", "a=2"]) == {"a": "2", "b": "x=y"}


# ------------------------------------------------------------------------------ one line, the user's path


def test_usage_errors_are_one_line_for_every_command() -> None:
    """click's own refusals (an unknown option here; a missing one and a bad value are cases of test_failures.py)
    are one ``error:`` line with exit 2 for every command, not typer's usage box."""
    app = build_app()
    runner = CliRunner()
    problems = []
    for command in _leaf_commands():
        done = runner.invoke(app, [*command.split(), "--no-such-option"])
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        if not (done.exit_code == EXIT_BAD_INPUT and len(lines) == 1
                and lines[0].startswith("error: no such option: --no-such-option")  # click may add close matches
                and lines[0].endswith(f"(see homie {command} --help)")):
            problems.append(f"homie {command}: exit {done.exit_code}, {done.stderr!r}")
    assert not problems, "\n".join(problems)


def test_errors_name_the_users_path_not_the_atomic_write_temporary() -> None:
    assert classify(OSError(errno.ENOENT, "No such file or directory", "/proc/.x.tmp-ab12cd_3")) == (
        EXIT_BAD_INPUT, "cannot use /proc/x: No such file or directory")
    assert user_path("/data/.run1.tmp-abcd1234/rounds.jsonl") == "/data/run1/rounds.jsonl"
    assert user_path("/data/.report.json.abcd1234") == "/data/report.json"  # atomic_write_text's file
    assert user_path("/data/.front.abcd1234.png") == "/data/front.png"
    assert user_path("/home/me/.config/homie") == "/home/me/.config/homie"

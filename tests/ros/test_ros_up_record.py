"""Graph runs are scored like in-process runs: ``homie up sim`` (the command, as a user runs it) writes the
same episode record as ``homie run`` (its run configuration included, which ``homie run --config`` repeats in
one process), ``homie metrics`` prints the same table on both, the planner options
of ``homie run`` reach the graph's planner, and a ``homie_msgs/Task`` with only a task id runs that task."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from homiebot.testing.ros_helpers import graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HOMIE = str(Path(sys.executable).with_name("homie"))
TASK = "demo-drawer"


def _homie(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([HOMIE, *args], capture_output=True, text=True, env={**env, "COLUMNS": "200"},
                          cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ros_domain) -> dict[str, Path]:
    """The same task and seed through the graph (homie up sim) and in-process (homie run), views kept."""
    tmp = tmp_path_factory.mktemp("up_record")
    env = graph_environment(ros_domain)
    up = _homie("up", "sim", "--task", TASK, "--seed", "1", "--images", "--out", str(tmp / "up"),
                "--domain-id", str(ros_domain), env=env, cwd=tmp)
    assert up.returncode == 0, up.stderr[-3000:]
    run = _homie("run", "--task", TASK, "--seed", "1", "--no-video", "--out", str(tmp / "run"), env=env, cwd=tmp)
    assert run.returncode == 0, run.stderr[-3000:]
    return {"up": tmp / "up", "run": tmp / "run", "tmp": tmp, "env": env, "up_stdout": up.stdout + up.stderr,
            "run_stdout": run.stdout}  # homie up prints its tables on stderr, beside the graph's log lines


def _verdict_line(stdout: str) -> str:
    """The closing line's verdict, e.g. ``success (keypaths: TP 5/5)``."""
    lines = [line for line in stdout.splitlines() if line.startswith(("success (", "failure ("))]
    assert lines, stdout[-1500:]
    return lines[-1][: lines[-1].index(")") + 1]


def test_up_announces_the_verdict_homie_run_announces(runs) -> None:
    """One verdict on every surface: homie up's closing line is the record's verdict, as homie run's is (not the
    simulator's goal check), and its round table shows EMMOE's word None as what it means."""
    assert _verdict_line(runs["up_stdout"]) == _verdict_line(runs["run_stdout"])
    assert "goal_satisfied=" not in runs["up_stdout"]
    table = [line for line in runs["up_stdout"].splitlines() if line.startswith("│")]
    assert table and not any(" None " in line for line in table), table


def test_up_writes_the_record_homie_run_writes(runs) -> None:
    record, reference = runs["up"] / "record", runs["run"]
    up_summary = json.loads((record / "summary.json").read_text())
    run_summary = json.loads((reference / "summary.json").read_text())
    # Everything but the clock and the files only the in-process loop has (its simulator draws topdown.png). Both
    # keep the run configuration they were built from (homiebot.agent.build): the same but for what the graph's
    # record keeps of the views (homie up --images: images; homie run: when the simulator renders).
    assert up_summary["run"] == {**run_summary["run"], "recording": {**run_summary["run"]["recording"], "images": True}}
    for key in sorted(set(run_summary) - {"wall_time_s", "files", "run"}):
        assert up_summary[key] == run_summary[key], key
    assert up_summary["files"]["views"] == run_summary["files"]["views"] and up_summary["files"]["views"]
    for name in ("rounds.jsonl", "conversation.json", *up_summary["files"]["views"]):
        assert (record / name).is_file(), name
    up_rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]
    run_rounds = [json.loads(line) for line in (reference / "rounds.jsonl").read_text().splitlines()]
    assert [(r["subtask"], r["feedback"]) for r in up_rounds] == [(r["subtask"], r["feedback"]) for r in run_rounds]


def test_a_graph_record_repeats_in_one_process(runs) -> None:
    """homie run --config on the graph's record (its summary.json's run) plays the same episode in-process."""
    again = runs["tmp"] / "again"
    done = _homie("run", "--config", str(runs["up"] / "record" / "summary.json"), "--no-report", "--out", str(again),
                  env=runs["env"], cwd=runs["tmp"])
    assert done.returncode == 0, done.stderr[-3000:]
    up_summary = json.loads((runs["up"] / "record" / "summary.json").read_text())
    repeated = json.loads((again / "summary.json").read_text())
    assert repeated["run"] == {**up_summary["run"], "recording": {**up_summary["run"]["recording"], "report": False}}
    for key in ("task", "seed", "subtasks", "error_codes", "feedback", "success"):
        assert repeated[key] == up_summary[key], key


def test_metrics_print_the_same_table_for_both(runs) -> None:
    tables = []
    for directory in (runs["up"], runs["run"]):
        done = _homie("metrics", str(directory), env=runs["env"], cwd=runs["tmp"])
        assert done.returncode == 0, done.stderr[-2000:]
        table = [line for line in done.stdout.splitlines() if not line.startswith("episode record:")]
        tables.append(table)
    assert tables[0] == tables[1]
    assert any("100.00" in line for line in tables[0])  # the expert solves it: SR 100
    done = _homie("metrics", str(runs["up"]), "--json", env=runs["env"], cwd=runs["tmp"])
    assert json.loads(done.stdout)["summary"]["episodes"] == 1


def test_planner_options_reach_the_graph(runs) -> None:
    """homie run's --base-url / --model reach the graph's planner: an unreachable server is the planner's
    error (exit 1, one error line naming the URL), not an unknown option."""
    out = runs["tmp"] / "openai"
    done = _homie("up", "sim", "--task", TASK, "--planner", "openai", "--base-url", "http://127.0.0.1:9/v1",
                  "--model", "nobody", "--out", str(out), "--domain-id", runs["env"]["ROS_DOMAIN_ID"], env=runs["env"],
                  cwd=runs["tmp"])
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "127.0.0.1:9" in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_a_task_with_only_its_id_runs(tmp_path, ros_domain) -> None:
    """A homie_msgs/Task naming only a task id: the node takes the scene and instruction from the suite."""
    from homie_msgs.msg import EpisodeStatus, Task

    from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph
    from homiebot.testing.ros_helpers import WireListener

    nodes = [n for n in load_graph().nodes if n.name != "perception"]
    supervisor = Supervisor(GraphSpec(nodes=nodes), env=graph_environment(ros_domain), log_dir=tmp_path / "logs")
    listener = WireListener({"/homie/episode_status": (EpisodeStatus, EVENTS_QOS)})
    publisher = listener.node.create_publisher(Task, "/homie/task", LATCHED_QOS)
    over = (EpisodeStatus.ENDED, EpisodeStatus.FAILED, EpisodeStatus.ROUND_LIMIT, EpisodeStatus.TIMEOUT)
    try:
        supervisor.start()
        publisher.publish(Task(task_id=TASK))  # no scene, no instruction
        listener.wait_for(lambda: any(s.state in over for s in listener.get("/homie/episode_status")), 180.0)
    finally:
        supervisor.stop()
        listener.close()
    final = [s for s in listener.get("/homie/episode_status") if s.state in over]
    logs = "\n".join(p.read_text()[-1500:] for p in (tmp_path / "logs").glob("*.log"))
    assert final and final[-1].state == EpisodeStatus.ENDED, logs
    assert final[-1].task_id == TASK and final[-1].goal == EpisodeStatus.GOAL_MET and not final[-1].error

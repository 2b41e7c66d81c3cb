"""Nodes end cleanly: a terminal's Ctrl-C under ``ros2 launch`` reaches every node twice (SIGINT to the process
group, then launch's own SIGINT to each process), and SIGTERM comes from supervisors; either way a node exits 0
with no traceback. And the graph ends after its episode when asked (``homie up sim --exit-when-done``, the
project's graph runner, as ``exit_when_done:=true`` does under ``ros2 launch``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from homiebot.testing.ros_helpers import WireListener, graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HOMIE = str(Path(sys.executable).with_name("homie"))
TASK = "demo-green-can"
#: A node that runs homiebot.ros.spin.spin_node (the bridge, executors and perception share it) and the planner
#: node, which has its own main beside its episode thread.
NODES = {"nav_executor": "executor_nodes.nav_executor", "planner_node": "planner_node.node"}


def _start(module: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_node(listener: WireListener, name: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline and process.poll() is None:
        if name in {n for n, _ in listener.node.get_node_names_and_namespaces()}:
            return
        time.sleep(0.1)
    _, err = process.communicate(timeout=10) if process.poll() is not None else ("", "")
    pytest.fail(f"{name} did not come up: {err[-2000:]}")


def _ctrl_c_under_launch(process: subprocess.Popen) -> None:
    """What the terminal and launch do on Ctrl-C: SIGINT to the group, then SIGINT to the process, which launch
    repeats while the process lives (launch escalates to SIGTERM later)."""
    os.killpg(process.pid, signal.SIGINT)
    for _ in range(100):
        time.sleep(0.005)
        if process.poll() is not None:
            return
        try:
            os.kill(process.pid, signal.SIGINT)
        except ProcessLookupError:
            return


@pytest.mark.parametrize("name", sorted(NODES))
@pytest.mark.parametrize("how", ["ctrl-c under launch", "sigterm"])
def test_a_node_exits_cleanly_on_a_signal(name, how, ros_domain) -> None:
    env = graph_environment(ros_domain)
    listener = WireListener({})
    process = _start(NODES[name], env)
    try:
        _wait_for_node(listener, name, process)
        time.sleep(0.5)  # well into its spin
        if how == "sigterm":
            os.killpg(process.pid, signal.SIGTERM)
        else:
            _ctrl_c_under_launch(process)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        listener.close()
    assert process.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]


def test_up_with_exit_when_done_runs_the_first_task_sent_then_shuts_the_graph_down(tmp_path, ros_domain) -> None:
    """``homie up sim --exit-when-done`` waits for a homie_msgs/Task on /homie/task, runs it, writes its result and
    record, and then stops every node of the graph cleanly and exits 0 (without the option it keeps waiting)."""
    from homie_msgs.msg import Task

    from homiebot.ros.calls import LATCHED_QOS

    env = graph_environment(ros_domain)
    out = tmp_path / "up"
    listener = WireListener({})
    publisher = listener.node.create_publisher(Task, "/homie/task", LATCHED_QOS)  # latched: the planner gets it late
    publisher.publish(Task(task_id=TASK))
    try:
        up = subprocess.run([HOMIE, "up", "sim", "--exit-when-done", "--out", str(out), "--domain-id", str(ros_domain)],
                            capture_output=True, text=True, env={**env, "COLUMNS": "200"}, cwd=tmp_path, timeout=300)
    finally:
        listener.close()
    logs = {p.name: p.read_text() for p in (out / "logs").glob("*.log")}
    assert up.returncode == 0, up.stderr[-3000:] + "\n".join(text[-1500:] for text in logs.values())
    result = json.loads((out / "result.json").read_text())
    assert result["task_id"] == TASK and result["ended"] and result["goal_satisfied"]
    assert result["rounds"][-1]["subtask"] == "[End]"
    assert (out / "record" / "summary.json").is_file()
    assert "graph stopped: " in up.stderr
    stopped = up.stderr.split("graph stopped: ", 1)[1].splitlines()[0]
    unclean = [entry.split("=")[0] for entry in stopped.split(", ") if not entry.endswith("=0")]
    # Every node ended cleanly; a hung one has written its threads' stacks into its log (homiebot.ros.spin).
    assert not unclean, stopped + "\n" + "\n".join(logs.get(f"{name}.log", "")[-4000:] for name in unclean)
    assert not [name for name, text in logs.items() if "Traceback" in text], logs


def test_a_teardown_that_hangs_writes_every_threads_stack_before_the_kill(ros_domain) -> None:
    """A node whose teardown hangs ignores further SIGINT/SIGTERM (ShutdownSignals.quiet), so only the supervisor's
    SIGKILL ends it; before that it writes every thread's stack to its stderr (its log under ``homie up``), which
    names the call it was stuck in. Here the hang is a sleep after quiet(), with the dump's delay shortened."""
    script = (
        "import time\n"
        "import homiebot.ros.spin as spin\n"
        "spin.TEARDOWN_STACK_DUMP_S = 0.3\n"
        "def stuck_in_the_middleware():\n"
        "    time.sleep(3)\n"
        "spin.ShutdownSignals().install().quiet()\n"
        "stuck_in_the_middleware()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], env=graph_environment(ros_domain),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(1.5)
    os.killpg(process.pid, signal.SIGTERM)  # ignored: the teardown has begun
    time.sleep(0.2)
    assert process.poll() is None
    os.killpg(process.pid, signal.SIGKILL)
    _, err = process.communicate(timeout=10)
    assert "Timeout" in err and "stuck_in_the_middleware" in err, err

"""The ROS-free parts of the ROS 2 layer: the overlay environment, the graph / params files, the supervisor's
restart policy and shutdown, and the planner-side episode loop against the in-process loop. These run
everywhere (no rclpy needed)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from homiebot.ros.environment import Overlay, RosEnvironmentError, find_overlay, overlay_environment, shell_exports
from homiebot.ros.supervisor import (
    DEFAULT_GRAPH,
    DEFAULT_PARAMS,
    GraphConfigError,
    GraphSpec,
    NodeSpec,
    Supervisor,
    check_params_file,
    load_graph,
    ros_parameter_argument,
)

# ------------------------------------------------------------------------------------------------ environment


def _fake_install(root: Path) -> Path:
    """An install tree shaped like colcon's: an ament_cmake package and a symlink-installed ament_python one."""
    install = root / "install"
    msgs = install / "homie_msgs"
    (msgs / "share" / "homie_msgs" / "environment").mkdir(parents=True)
    (msgs / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (msgs / "share" / "homie_msgs" / "package.dsv").write_text(
        "source;share/homie_msgs/local_setup.bash\nsource;share/homie_msgs/local_setup.dsv\n"
    )
    (msgs / "share" / "homie_msgs" / "local_setup.dsv").write_text(
        "source;share/homie_msgs/environment/ament_prefix_path.sh\nsource;share/homie_msgs/environment/library_path.sh\n"
    )
    (msgs / "share" / "homie_msgs" / "environment" / "ament_prefix_path.dsv").write_text("prepend-non-duplicate;AMENT_PREFIX_PATH;\n")
    (msgs / "share" / "homie_msgs" / "environment" / "library_path.dsv").write_text("prepend-non-duplicate;LD_LIBRARY_PATH;lib\n")
    node = install / "planner_node"
    (node / "share" / "planner_node" / "hook").mkdir(parents=True)
    develop = root / "build" / "planner_node" / "share" / "planner_node" / "hook"
    develop.mkdir(parents=True)
    (develop / "pythonpath_develop.dsv").write_text(f"prepend-non-duplicate;PYTHONPATH;{root / 'build' / 'planner_node'}\n")
    (node / "share" / "planner_node" / "hook" / "pythonpath.dsv").write_text("prepend-non-duplicate-if-exists;PYTHONPATH;lib/python3.11/site-packages\n")
    (node / "share" / "planner_node" / "package.dsv").write_text(
        "source;share/planner_node/hook/pythonpath.dsv\nsource;../../build/planner_node/share/planner_node/hook/pythonpath_develop.dsv\n"
    )
    (install / ".homie-ros-mode").write_text("wheels\n")
    return install


def test_overlay_environment_follows_colcon_dsv_files(tmp_path):
    install = _fake_install(tmp_path)
    base = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib"}
    env = overlay_environment(find_overlay(install), base=base, venv_prefix=tmp_path / "venv")
    assert env["AMENT_PREFIX_PATH"].split(os.pathsep)[0] == str(install / "homie_msgs")
    assert str(tmp_path / "venv") in env["AMENT_PREFIX_PATH"].split(os.pathsep)
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(install / "homie_msgs" / "lib")
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[-1] == "/opt/lib"
    # the symlink-install develop hook (../../build/...) is followed; the if-exists site-packages is skipped
    assert env["PYTHONPATH"] == str(tmp_path / "build" / "planner_node")
    assert env["_ROS_WHEELS_BOOTSTRAP_COMPLETE"] == "1" and env["HOMIE_ROS_OVERLAY"] == str(install.resolve())
    assert base == {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib"}, "the base must not be modified"
    # idempotent: applying it again adds nothing
    assert overlay_environment(find_overlay(install), base=env, venv_prefix=tmp_path / "venv") == env
    exports = shell_exports(env, base)
    assert "export PYTHONPATH=" in exports and "export PATH=" not in exports


def test_missing_overlay_says_what_to_run(tmp_path):
    with pytest.raises(RosEnvironmentError, match="setup_ros.sh"):
        find_overlay(tmp_path / "install")


def test_system_overlay_mode_is_parsed():
    assert Overlay(Path("/x"), "system:/opt/ros/jazzy").system_prefix == Path("/opt/ros/jazzy")
    assert Overlay(Path("/x"), "wheels").system_prefix is None


def test_ros_env_script_is_safe_under_strict_bash(tmp_path):
    """scripts/ros_env.sh must be sourceable twice under `set -euo pipefail`, built or not."""
    import subprocess

    script = Path(__file__).parents[2] / "scripts" / "ros_env.sh"
    command = f"set -euo pipefail; source {script}; first=\"${{PYTHONPATH-}}\"; source {script}; [ \"$first\" = \"${{PYTHONPATH-}}\" ]; echo ok"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr


# ------------------------------------------------------------------------------------------------ config files


def test_project_graph_and_params_are_valid():
    graph = load_graph(DEFAULT_GRAPH)
    params = check_params_file(DEFAULT_PARAMS, graph)
    assert [n.name for n in graph.nodes][0] == "sim_bridge" and graph.node("planner_node").required
    # EMMOE's defaults come from the core (homiebot/config.py), not from copies in the file.
    assert params["planner_node"]["planner"] == "expert"
    assert "max_rounds" not in params["planner_node"] and "far_threshold_m" not in params["executor"]


def test_bad_graph_and_params_files_name_the_problem(tmp_path):
    bad = tmp_path / "graph.yaml"
    bad.write_text("nodes:\n  - name: a\n    package: p\n    executable: e\n    module: m\n    restart: sometimes\n")
    with pytest.raises(GraphConfigError, match=r"graph.yaml: nodes\.0\.restart"):
        load_graph(bad)
    with pytest.raises(GraphConfigError, match="not found"):
        load_graph(tmp_path / "missing.yaml")
    params = tmp_path / "params.yaml"
    params.write_text("planer_node:\n  ros__parameters: {planner: expert}\n")
    with pytest.raises(GraphConfigError, match="'planer_node' is not a node"):
        check_params_file(params, load_graph())
    params.write_text("planner_node:\n  planner: expert\n")
    with pytest.raises(GraphConfigError, match="ros__parameters"):
        check_params_file(params, load_graph())


@pytest.mark.parametrize(
    ("value", "text"),
    [("expert", 'p:="expert"'), ("true", 'p:="true"'), (True, "p:=true"), (3, "p:=3"), (0.5, "p:=0.5"),
     ("it's \"quoted\"", 'p:="it\'s \\"quoted\\""'), (["a", "b"], 'p:=["a", "b"]')],
)
def test_ros_parameter_arguments_keep_their_types(value, text):
    assert ros_parameter_argument("p", value) == text


# ------------------------------------------------------------------------------------------------ supervisor


def _script_graph(tmp_path: Path, body: str, **spec) -> tuple[GraphSpec, Path]:
    """A graph of one python 'node' (a module in tmp_path) and an empty params file."""
    (tmp_path / "fake_node.py").write_text(textwrap.dedent(body))
    params = tmp_path / "params.yaml"
    params.write_text("{}\n")
    node = NodeSpec(name="fake", package="p", executable="e", module="fake_node", **spec)
    return GraphSpec(nodes=[node]), params


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_supervisor_restarts_a_crashed_node_by_policy(tmp_path):
    counter = tmp_path / "starts"
    graph, params = _script_graph(tmp_path, f"""
        import pathlib, sys
        path = pathlib.Path({str(counter)!r})
        path.write_text(path.read_text() + "x" if path.exists() else "x")
        sys.exit(7)
    """, restart="on-failure", max_restarts=2, required=True)
    supervisor = Supervisor(graph, params, env=_env(tmp_path), restart_delay_s=0.01)
    supervisor.start()
    ended = supervisor.run(lambda: False, timeout_s=30)
    supervisor.stop()
    assert ended is not None and ended.spec.name == "fake"
    assert counter.read_text() == "xxx"  # first start + 2 restarts
    assert ended.exit_codes == [7, 7, 7] and ended.restarts == 2


def test_supervisor_does_not_restart_a_clean_exit_on_failure_policy(tmp_path):
    graph, params = _script_graph(tmp_path, "print('done')\n", restart="on-failure", required=True)
    supervisor = Supervisor(graph, params, env=_env(tmp_path), restart_delay_s=0.01)
    supervisor.start()
    ended = supervisor.run(lambda: False, timeout_s=30)
    supervisor.stop()
    assert ended is not None and ended.exit_codes == [0] and ended.restarts == 0


def test_supervisor_stops_nodes_with_sigint_then_escalates(tmp_path):
    graph, params = _script_graph(tmp_path, """
        import signal, time
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # a node that ignores Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # and SIGTERM
        while True:
            time.sleep(0.1)
    """)
    supervisor = Supervisor(graph, params, env=_env(tmp_path), stop_timeout_s=0.5)
    supervisor.start()
    time.sleep(1.0)
    started = time.monotonic()
    codes = supervisor.stop()
    assert codes["fake"] == -signal.SIGKILL
    assert time.monotonic() - started < 6


def test_supervisor_starts_an_off_path_node_with_its_niceness(tmp_path):
    out = tmp_path / "nice.txt"
    graph, params = _script_graph(tmp_path, f"""
        import os, pathlib
        pathlib.Path({str(out)!r}).write_text(str(os.nice(0)))
    """, restart="never", required=True, nice=7)
    supervisor = Supervisor(graph, params, env=_env(tmp_path))
    supervisor.start()
    supervisor.run(lambda: False, timeout_s=30)
    supervisor.stop()
    assert int(out.read_text()) == os.nice(0) + 7


def test_project_graph_runs_perception_below_the_planners_path():
    from homiebot.ros.supervisor import load_graph

    nice = {node.name: node.nice for node in load_graph().nodes}
    assert nice.pop("perception") > 0 and set(nice.values()) == {0}


def test_supervisor_passes_params_file_and_overrides(tmp_path):
    out = tmp_path / "argv.txt"
    graph, params = _script_graph(tmp_path, f"""
        import pathlib, sys
        pathlib.Path({str(out)!r}).write_text("\\n".join(sys.argv[1:]))
    """, restart="never", required=True)
    supervisor = Supervisor(graph, params, overrides={"fake": {"task": "demo-drawer", "seed": 2}}, env=_env(tmp_path))
    supervisor.start()
    supervisor.run(lambda: False, timeout_s=30)
    supervisor.stop()
    assert out.read_text().splitlines() == ["--ros-args", "--params-file", str(params.resolve()),
                                            "-p", 'task:="demo-drawer"', "-p", "seed:=2"]
    with pytest.raises(GraphConfigError, match="no node named 'nobody'"):
        Supervisor(graph, params, overrides={"nobody": {}}, env=_env(tmp_path))


# ------------------------------------------------------------------------------------------------ episode loop


class InProcessBackend:
    """The graph's backend (run_over_backend's) wired straight to a simulator and the core Executor (no ROS)."""

    def __init__(self, sim):
        from homiebot.executor.executor import Executor

        self.sim = sim
        self.executor = Executor(sim)
        self.observed = 0

    def reset(self, scene, seed):
        self.sim.reset(scene, seed=seed)
        return self.sim.state(), self.sim.scene_spec()

    def render(self):
        return self.sim.observe().images()

    def observe(self):
        self.observed += 1
        return self.sim.observe()

    def state(self):
        return self.sim.state()

    def execute(self, subtask, model, inventory, round_index):
        from homiebot.ros.episode import ExecutionOutcome

        report = self.executor.execute_detailed(subtask, model, inventory)
        return ExecutionOutcome(report.feedback, report.path_length, dict(report.timings))


class TimeoutBackend(InProcessBackend):
    def execute(self, subtask, model, inventory, round_index):
        raise TimeoutError("action /homie/execute_subtask: no answer within 0.1 s")


@pytest.mark.parametrize("task_id", ["demo-drawer", "demo-green-can"])
def test_graph_episode_loop_matches_run_episode(task_id):
    """The planner node's loop (run_over_backend) and the in-process loop make the same calls in the same order:
    same subtasks, feedback, inventories, path and goal verdict for the same task and seed."""
    from homiebot.agent.loop import EpisodeConfig, run_episode, run_over_backend
    from homiebot.planner.registry import make_planner
    from homiebot.ros.episode import round_signature
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    task = get_task(task_id)
    config = EpisodeConfig(render=False)
    sim = make_simulator("mujoco", render=False)
    try:
        reference = run_episode(sim, make_planner("expert"), task=task, seed=1, config=config)
        outcome = run_over_backend(InProcessBackend(sim), make_planner("expert"), task=task, seed=1, config=config)
    finally:
        sim.shutdown()
    assert round_signature(outcome.trajectory) == round_signature(reference)
    assert outcome.trajectory.path_length == pytest.approx(reference.path_length)
    assert outcome.trajectory.goal_satisfied == reference.goal_satisfied is True
    assert [r.instruction for r in outcome.trajectory.rounds] == [r.instruction for r in reference.rounds]


def test_graph_episode_gives_every_planner_what_the_in_process_loop_gives():
    """The scene spec reaches every planner; a planner that is not privileged also gets the observation and the
    instances seen so far. The random baseline (which needs both) then makes the same choices in both loops,
    and the expert's rounds fetch no segmentation."""
    from homiebot.agent.loop import EpisodeConfig, run_episode, run_over_backend
    from homiebot.planner.base import Planner
    from homiebot.planner.registry import make_planner
    from homiebot.ros.episode import reads_observation, round_signature
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    class Spy(Planner):
        name = "spy"

        def __init__(self):
            self.requests = []

        def plan(self, request):
            self.requests.append(request)
            return "Analysis: x\nSubtask: [Go to, fridge]\nModel: NoMaD" if len(self.requests) < 3 else "Analysis: x\nSubtask: [End]\nModel: None"

    task = get_task("demo-green-can")
    config = EpisodeConfig(max_rounds=6)
    assert reads_observation(make_planner("random")) and not reads_observation(make_planner("expert"))
    sim = make_simulator("mujoco")
    try:
        reference = run_episode(sim, make_planner("random"), task=task, seed=0, config=config)
        backend = InProcessBackend(sim)
        outcome = run_over_backend(backend, make_planner("random"), task=task, config=config)
        assert outcome.trajectory.error is None
        assert round_signature(outcome.trajectory) == round_signature(reference)
        assert backend.observed == len(reference.rounds)

        spies = {}
        for wiring in ("in-process", "graph"):
            spy = spies[wiring] = Spy()
            if wiring == "in-process":
                run_episode(sim, spy, task=task, seed=0, config=config)
            else:
                run_over_backend(InProcessBackend(sim), spy, task=task, config=config)
        for ours, theirs in zip(spies["graph"].requests, spies["in-process"].requests, strict=True):
            assert ours.scene == theirs.scene is not None
            assert ours.max_rounds == theirs.max_rounds == 6
            assert ours.last_error == theirs.last_error
            assert ours.observation.visible_instances(20) == theirs.observation.visible_instances(20)
            assert ours.grounded_targets == theirs.grounded_targets and "fridge" in ours.grounded_targets

        expert_backend = InProcessBackend(sim)
        expert = run_over_backend(expert_backend, make_planner("expert"), task=task)
        assert expert.trajectory.goal_satisfied is True and expert_backend.observed == 0
    finally:
        sim.shutdown()


def test_graph_episode_reports_a_timeout_instead_of_raising():
    from homiebot.agent.loop import EpisodeConfig, run_over_backend
    from homiebot.planner.registry import make_planner
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    task = get_task("demo-green-can")
    sim = make_simulator("mujoco", render=False)
    try:
        outcome = run_over_backend(TimeoutBackend(sim), make_planner("expert"), task=task,
                                   config=EpisodeConfig(render=False))
    finally:
        sim.shutdown()
    assert outcome.timed_out and "execute_subtask" in outcome.trajectory.error
    assert outcome.trajectory.rounds == [] and outcome.trajectory.goal_satisfied is None


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="process supervision is tested on Linux")

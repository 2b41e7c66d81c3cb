"""A two-agent episode (PARTNR's robot and human) through the whole graph, separate processes over real DDS
(launch/config/graph_pair.yaml): the sim bridge serves the human under /human, the human's executors are the
same nodes remapped there, and the planner node drives both agents in lock-step rounds. The rounds of both
agents equal the in-process loop's (decentralized, and centralized: one planner reading both agents from one
state, which the planner node rebuilds from both agents' states), the human's rounds are on the wire under
/human, and the bag of the episode opens, holds both agents' streams and replays both agents' rounds to a fresh
pair of planners. ``homie up sim --partner-planner`` runs the pair from the command line and prints both agents'
rounds; ``homie bag replay`` replays its bag's two agents."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from homiebot.testing.ros_helpers import graph_environment

REPO = Path(__file__).resolve().parents[2]

TASK = "partnr-1-022"  # "Turn on the microwave and put the mug on the chair.": the switch is the human's share


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((tmp_path / "logs").glob("*.log")))


def _signature(rounds):
    return [(r.subtask_text, r.feedback.code.value, r.feedback.message, tuple(r.feedback.inventory), r.feedback.attempts)
            for r in rounds]


def _result_signature(rounds):
    return [(r["subtask"], r["code"], r["message"], tuple(r["inventory"]), r["attempts"]) for r in rounds]


def test_the_launch_file_brings_up_the_pair_graph(monkeypatch, tmp_path):
    """``sim.launch.py partner_planner:=expert``: graph_pair.yaml's nodes, each with the graph's own parameters and
    remappings (its name is launch's ``name=``), and the planner node told to drive the pair (no ROS needed: the
    launch file runs over the fakes of tests/ros/test_launch_file.py)."""
    import shutil

    import yaml
    from test_launch_file import GRAPH_PACKAGES, FakeContext, FakeNode, _arguments, _load_launch_file, _share

    share = _share(tmp_path)
    shutil.copy(REPO / "launch" / "config" / "graph_pair.yaml", share / "config" / "graph_pair.yaml")
    launch_file = _load_launch_file(monkeypatch, share, GRAPH_PACKAGES)
    actions = launch_file._graph(FakeContext(_arguments(launch_file, task=TASK, partner_planner="expert")))
    nodes = {a.kwargs["name"]: a.kwargs for a in actions if isinstance(a, FakeNode)}
    pair = yaml.safe_load((REPO / "launch" / "config" / "graph_pair.yaml").read_text())["nodes"]
    assert list(nodes) == [n["name"] for n in pair]
    assert {"human": True} in nodes["sim_bridge"]["parameters"]
    human = nodes["human_executor"]
    assert {"role": "human", "execute_action": "/human/homie/execute_subtask", "navigate_action": "/human/navigate",
            "manipulate_action": "/human/manipulate", "state_service": "/human/sim/get_world_state"} in human["parameters"]
    assert human["executable"] == "executor" and human["remappings"] is None
    planner = nodes["planner_node"]["parameters"][-1]
    assert planner["partner_planner"] == "expert" and planner["mode"] == "decentralized"
    assert "human_executor" in planner["await_nodes"].split(",")
    # Without a partner the standard graph, as before.
    actions = launch_file._graph(FakeContext(_arguments(launch_file, task=TASK)))
    assert "human_executor" not in [a.kwargs["name"] for a in actions if isinstance(a, FakeNode)]


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["decentralized", "centralized"])
def test_two_agent_episode_through_the_graph_equals_in_process(tmp_path, ros_domain, mode):
    from homiebot.agent.loop import AgentSlot, EpisodeConfig, run_episode
    from homiebot.multiagent.centralized import AgentRole
    from homiebot.multiagent.pair import make_pair_planners, role_config
    from homiebot.ros.bag import bag_info, record_bag
    from homiebot.ros.supervisor import PAIR_GRAPH, Supervisor, load_graph
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task, task_actions

    task = get_task(TASK)
    base = EpisodeConfig.with_actions(task_actions(task))
    robot, human = make_pair_planners(mode, "expert", "expert")
    sim = make_simulator("mujoco", human=True)
    try:
        expected = run_episode(sim, robot, task=task, config=role_config(AgentRole.ROBOT, base),
                               partner=AgentSlot(human, role_config(AgentRole.HUMAN, base)))
        expected_time = sim.sim_time
    finally:
        sim.shutdown()
    assert expected.error is None and expected.ended and expected.goal_satisfied
    assert any(r.subtask_text.startswith("[Turn on") for r in expected.partner_rounds)

    graph = load_graph(PAIR_GRAPH)
    result_path = tmp_path / "result.json"
    others = ",".join(n.name for n in graph.nodes if n.name != "planner_node")
    overrides = {"planner_node": {"task": TASK, "planner": "expert", "partner_planner": "expert", "mode": mode,
                                  "exit_when_done": True, "result_path": str(result_path), "await_subscribers": 1,
                                  "await_nodes": others}}
    supervisor = Supervisor(graph, overrides=overrides, env=graph_environment(ros_domain), log_dir=tmp_path / "logs",
                            stop_timeout_s=10.0)
    bag_path = tmp_path / "pair_bag"
    ready, stop, recorded = threading.Event(), threading.Event(), {}

    def record() -> None:
        recorded["summary"] = record_bag(bag_path, exclude_camera_topics=True, should_stop=stop.is_set,
                                         ready=ready.set)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    assert ready.wait(30)
    try:
        supervisor.start()
        ended_by = supervisor.run(lambda: False, timeout_s=240)
    finally:
        time.sleep(0.5)  # the recorder's last messages
        stop.set()
        recorder.join(timeout=30)
        codes = supervisor.stop()
    assert ended_by is not None and ended_by.spec.name == "planner_node", f"planner did not finish\n{_logs(tmp_path)}"
    assert ended_by.exit_codes[-1] == 0 and result_path.exists(), _logs(tmp_path)
    assert all(code == 0 for code in codes.values()), (codes, _logs(tmp_path))
    result = json.loads(result_path.read_text())
    assert result["error"] is None and result["ended"] is True and result["goal_satisfied"] is True
    assert _result_signature(result["rounds"]) == _signature(expected.rounds), _logs(tmp_path)
    assert result["partner_planner"] == expected.partner_planner
    assert _result_signature(result["partner_rounds"]) == _signature(expected.partner_rounds), _logs(tmp_path)
    # The lock-step rounds' clocks are synced through the bridge as in-process: the same simulated time at the end.
    assert result["sim_time_s"] == pytest.approx(expected_time, abs=1e-3)

    # The bag opens and holds both agents: the robot's rounds on /homie/..., the human's on /human/homie/...,
    # the human's views and world states from the bridge.
    info = bag_info(bag_path)
    counts = {t.name: t.count for t in info.topics}
    assert counts["/homie/planner_output"] == len(expected.rounds)
    assert counts["/human/homie/planner_output"] == len(expected.partner_rounds)
    assert counts.get("/human/homie/views", 0) >= 1  # rendered when the world changed since the human last looked
    assert counts.get("/human/sim/world_state", 0) >= 1
    assert info.episode["task_id"] == TASK and info.episode["state"] == "ENDED"
    from rclpy.serialization import deserialize_message
    from tf2_msgs.msg import TFMessage

    from homiebot.ros.bag import read_messages

    frames = {(t.header.frame_id, t.child_frame_id) for m in read_messages(bag_path, ["/tf"])
              for t in deserialize_message(m.data, TFMessage).transforms}
    assert ("odom", "human/base_link") in frames and ("odom", "base_link") in frames  # rviz shows both agents
    # ... and replays: both agents' recorded views, states and feedback fed to a fresh pair of the same mode, in the
    # loop's lock-step order, give the recorded subtask in every round of both agents (homie bag replay). The human's
    # outputs name the world version they were planned on, and the bag holds the human's state of every round.
    from homiebot.ros.replay import holds_two_agents, replay_planner

    assert holds_two_agents(bag_path)
    fresh_robot, fresh_human = make_pair_planners(mode, "expert", "expert")
    report = replay_planner(bag_path, fresh_robot, partner=fresh_human)
    assert [r.recorded for r in report.rounds] == [r.subtask_text for r in expected.rounds]
    assert [r.recorded for r in report.partner_rounds] == [r.subtask_text for r in expected.partner_rounds]
    assert report.partner_planner == fresh_human.name
    assert report.robot_agreement == report.partner_agreement == report.agreement == 1.0, report.to_dict()


def test_homie_ups_supervisor_starts_the_human_executors_under_their_names():
    """The supervisor's command line for graph_pair.yaml's nodes: the node's name as a remap, then the graph's
    parameters before the caller's overrides (which win)."""
    from homiebot.ros.supervisor import PAIR_GRAPH, Supervisor, load_graph

    graph = load_graph(PAIR_GRAPH)
    supervisor = Supervisor(graph, overrides={"human_executor": {"role": "robot"}}, env={}, shm_dir=None)
    command = supervisor.command(graph.node("human_executor"))
    assert command[command.index("-r") + 1] == "__node:=human_executor"
    parameters = [command[i + 1] for i, a in enumerate(command) if a == "-p"]
    assert 'execute_action:="/human/homie/execute_subtask"' in parameters
    assert 'role:="robot"' in parameters and 'role:="human"' not in parameters  # the override replaced it
    bridge = supervisor.command(graph.node("sim_bridge"))
    assert "human:=true" in bridge and "-r" not in bridge


class _HumanOnly:
    """The in-process backend with the human as the only acting agent: what a planner node with ``role: human``
    and no partner drives through the graph (its clients under /human)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def reset(self, scene: str, seed: int):
        _, spec = self.inner.reset(scene, seed)
        return self.inner.state(agent=1), spec

    def render(self):
        return self.inner.render(agent=1)

    def observe(self):
        return self.inner.observe(agent=1)

    def state(self):
        return self.inner.state(agent=1)

    def execute(self, subtask, model, inventory, round_index):
        return self.inner.execute(subtask, model, inventory, round_index, agent=1)


@pytest.mark.ros
@pytest.mark.slow
def test_a_planner_node_in_the_human_role_drives_the_human(tmp_path, ros_domain):
    """``role: human`` without a partner: the node's planner drives the human through /human (its views, state and
    executor); the rounds equal the in-process loop over the human's side."""
    from homiebot.agent.in_process import InProcessBackend
    from homiebot.agent.loop import EpisodeConfig, EpisodeLoop, EpisodeSpec
    from homiebot.planner.registry import make_planner
    from homiebot.ros.supervisor import PAIR_GRAPH, Supervisor, load_graph
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    task = get_task("demo-drawer")
    config = EpisodeConfig()
    sim = make_simulator("mujoco", human=True)
    try:
        backend = _HumanOnly(InProcessBackend(sim, config.executor_config(), agent_configs={1: config.executor_config()}))
        spec = EpisodeSpec(task.instruction, task.scene, task.seed, task.id, task.goal, 0, task.evaluation)
        expected = EpisodeLoop(backend, make_planner("expert"), spec, config, always_observe=True).run().trajectory
    finally:
        sim.shutdown()
    assert expected.error is None and expected.ended and expected.goal_satisfied

    graph = load_graph(PAIR_GRAPH)
    result_path = tmp_path / "result.json"
    others = ",".join(n.name for n in graph.nodes if n.name != "planner_node")
    overrides = {"planner_node": {"task": task.id, "planner": "expert", "role": "human", "partner_planner": "",
                                  "exit_when_done": True, "result_path": str(result_path), "await_nodes": others}}
    supervisor = Supervisor(graph, overrides=overrides, env=graph_environment(ros_domain), log_dir=tmp_path / "logs",
                            stop_timeout_s=10.0)
    try:
        supervisor.start()
        ended_by = supervisor.run(lambda: False, timeout_s=240)
    finally:
        supervisor.stop()
    assert ended_by is not None and ended_by.spec.name == "planner_node", f"planner did not finish\n{_logs(tmp_path)}"
    assert ended_by.exit_codes[-1] == 0 and result_path.exists(), _logs(tmp_path)
    result = json.loads(result_path.read_text())
    assert result["error"] is None and result["ended"] is True and result["goal_satisfied"] is True
    assert _result_signature(result["rounds"]) == _signature(expected.rounds), _logs(tmp_path)
    assert "partner_rounds" not in result


#: PARTNR's human fills and pours (appendix A.9.1, its liquid skills) in apartment_1: a pour from the empty mug first
#: (L4, the executor reads the mug's fill state off the wire), then fill at the sink and pour into the bowl.
LIQUID_SCRIPT = [("Go to", "mug", None), ("Pick", "mug", None), ("Go to", "bowl", None), ("Pour", "mug", "bowl"),
                 ("Go to", "sink", None), ("Fill", "mug", "sink"), ("Go to", "bowl", None), ("Pour", "mug", "bowl")]


@pytest.mark.ros
@pytest.mark.slow
def test_the_humans_fill_and_pour_through_the_graph_equal_in_process(tmp_path, ros_domain):
    """A planner node with ``role: human`` and a scripted planner: the human's Fill and Pour go through
    /human/homie/execute_subtask, /human/manipulate and /human/sim/manipulate (Manipulate FILL / POUR) and the
    containers' fill state through every WorldState (EntityState.filled_state): the rounds equal the in-process
    loop's over the human's side, the empty mug's pour refused (L4) the same way."""
    from homiebot.agent.in_process import InProcessBackend
    from homiebot.agent.loop import EpisodeConfig, EpisodeLoop, EpisodeSpec
    from homiebot.planner.prompt import format_output
    from homiebot.planner.registry import make_planner
    from homiebot.ros.supervisor import PAIR_GRAPH, Supervisor, load_graph
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task, task_actions
    from homiebot.types import Subtask

    outputs = [format_output(f"Step {i}.", Subtask(action, target, place), "NoMaD" if action == "Go to" else "RT-1-X")
               for i, (action, target, place) in enumerate(LIQUID_SCRIPT, 1)]
    task = get_task(TASK)  # apartment_1: the mug, the bowl and the sink
    config = EpisodeConfig.with_actions(task_actions(task))
    sim = make_simulator("mujoco", human=True)
    try:
        backend = _HumanOnly(InProcessBackend(sim, config.executor_config(), agent_configs={1: config.executor_config()}))
        spec = EpisodeSpec(task.instruction, task.scene, task.seed, task.id, task.goal, 0, task.evaluation)
        expected = EpisodeLoop(backend, make_planner("scripted", outputs=outputs), spec, config,
                               always_observe=True).run().trajectory
        filled = sim.state().entities["bowl"].is_filled
    finally:
        sim.shutdown()
    codes = [(r.subtask_text, r.feedback.code.value) for r in expected.rounds]
    assert ("[Pour, mug, bowl]", "L4") in codes and ("[Fill, mug, sink]", "OK") in codes and codes[-2:] == [
        ("[Pour, mug, bowl]", "OK"), ("[End]", "OK")], codes
    assert filled is True

    graph = load_graph(PAIR_GRAPH)
    result_path = tmp_path / "result.json"
    others = ",".join(n.name for n in graph.nodes if n.name != "planner_node")
    overrides = {"planner_node": {"task": TASK, "planner": "scripted", "planner_options": json.dumps({"outputs": outputs}),
                                  "role": "human", "partner_planner": "", "exit_when_done": True,
                                  "result_path": str(result_path), "await_nodes": others}}
    supervisor = Supervisor(graph, overrides=overrides, env=graph_environment(ros_domain), log_dir=tmp_path / "logs",
                            stop_timeout_s=10.0)
    try:
        supervisor.start()
        ended_by = supervisor.run(lambda: False, timeout_s=240)
    finally:
        supervisor.stop()
    assert ended_by is not None and ended_by.spec.name == "planner_node", f"planner did not finish\n{_logs(tmp_path)}"
    assert ended_by.exit_codes[-1] == 0 and result_path.exists(), _logs(tmp_path)
    result = json.loads(result_path.read_text())
    assert result["error"] is None, _logs(tmp_path)
    assert _result_signature(result["rounds"]) == _signature(expected.rounds), _logs(tmp_path)


@pytest.mark.ros
@pytest.mark.slow
def test_a_pick_of_what_the_other_holds_fails_the_same_way_through_the_graph(tmp_path, ros_domain):
    """A scripted human goes for the mug the expert robot picks first: its Pick is E1 naming the holder ("held by
    the robot"), through the graph as in-process (the human's executor lists both agents in its state); the bag
    replays to the same pair (``homie bag replay --partner-planner scripted -p script=...``)."""
    from homiebot.agent.loop import AgentSlot, EpisodeConfig, run_episode
    from homiebot.multiagent.centralized import AgentRole
    from homiebot.multiagent.pair import make_pair_planners, role_config
    from homiebot.ros.bag import record_bag
    from homiebot.ros.supervisor import PAIR_GRAPH, Supervisor, load_graph
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task, task_actions

    script = {"script": "Go to, mug; Pick, mug"}
    task = get_task(TASK)
    base = EpisodeConfig.with_actions(task_actions(task), max_rounds=5)
    robot, human = make_pair_planners("decentralized", "expert", "scripted", script)
    sim = make_simulator("mujoco", human=True)
    try:
        expected = run_episode(sim, robot, task=task, config=role_config(AgentRole.ROBOT, base),
                               partner=AgentSlot(human, role_config(AgentRole.HUMAN, base)))
    finally:
        sim.shutdown()
    refused = ("[Pick, mug]", "E1", "Unable to pick, the mug is held by the robot")
    assert refused in [(r.subtask_text, r.feedback.code.value, r.feedback.message) for r in expected.partner_rounds]

    graph = load_graph(PAIR_GRAPH)
    result_path = tmp_path / "result.json"
    others = ",".join(n.name for n in graph.nodes if n.name != "planner_node")
    overrides = {"planner_node": {"task": TASK, "planner": "expert", "partner_planner": "scripted",
                                  "planner_options": json.dumps(script), "max_rounds": 5, "exit_when_done": True,
                                  "result_path": str(result_path), "await_nodes": others, "await_subscribers": 1}}
    supervisor = Supervisor(graph, overrides=overrides, env=graph_environment(ros_domain), log_dir=tmp_path / "logs",
                            stop_timeout_s=10.0)
    bag_path = tmp_path / "bag"
    ready, stop = threading.Event(), threading.Event()
    recorder = threading.Thread(target=lambda: record_bag(bag_path, exclude_camera_topics=True, should_stop=stop.is_set,
                                                          ready=ready.set), daemon=True)
    recorder.start()
    assert ready.wait(30)
    try:
        supervisor.start()
        ended_by = supervisor.run(lambda: False, timeout_s=240)
    finally:
        time.sleep(0.5)  # the recorder's last messages
        stop.set()
        recorder.join(timeout=30)
        supervisor.stop()
    assert ended_by is not None and ended_by.spec.name == "planner_node", f"planner did not finish\n{_logs(tmp_path)}"
    assert result_path.exists(), _logs(tmp_path)
    result = json.loads(result_path.read_text())
    assert result["error"] is None, _logs(tmp_path)
    assert _result_signature(result["rounds"]) == _signature(expected.rounds), _logs(tmp_path)
    assert _result_signature(result["partner_rounds"]) == _signature(expected.partner_rounds), _logs(tmp_path)

    # The bag replays to the same pair, the scripted human's script given as a planner option (homie bag replay -p).
    import subprocess
    import sys

    homie = str(Path(sys.executable).with_name("homie"))
    report_path = tmp_path / "replay.json"
    replay = subprocess.run([homie, "bag", "replay", str(bag_path), "--partner-planner", "scripted", "-p",
                             f"script={script['script']}", "--min-agreement", "1.0", "--out", str(report_path)],
                            capture_output=True, text=True, env={**graph_environment(ros_domain), "COLUMNS": "200"},
                            cwd=tmp_path, timeout=300)
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert [r["recorded"] for r in report["partner_rounds"]] == [r.subtask_text for r in expected.partner_rounds]
    assert ("[Pick, mug]", "E1") in [(r["recorded"], r["feedback_code"]) for r in report["partner_rounds"]]


@pytest.mark.ros
@pytest.mark.slow
def test_homie_up_runs_the_pair_prints_both_agents_and_its_bag_replays(tmp_path, ros_domain):
    """``homie up sim --task partnr-1-022 --partner-planner expert --mode centralized --record`` (as a user runs it:
    graph_pair.yaml chosen by the option) prints the robot's and the human's rounds, writes both to result.json as
    the in-process loop has them, and ``homie bag replay BAG --mode centralized`` replays both agents' rounds of the
    bag with full agreement (gate ``--min-agreement 1.0``); the replay's JSON lists both."""
    import subprocess
    import sys

    from homiebot.agent.loop import AgentSlot, EpisodeConfig, run_episode
    from homiebot.multiagent.centralized import AgentRole
    from homiebot.multiagent.pair import make_pair_planners, role_config
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task, task_actions

    task = get_task(TASK)
    base = EpisodeConfig.with_actions(task_actions(task))
    robot, human = make_pair_planners("centralized", "expert", "expert")
    sim = make_simulator("mujoco", human=True)
    try:
        expected = run_episode(sim, robot, task=task, config=role_config(AgentRole.ROBOT, base),
                               partner=AgentSlot(human, role_config(AgentRole.HUMAN, base)))
    finally:
        sim.shutdown()

    homie = str(Path(sys.executable).with_name("homie"))
    env = {**graph_environment(ros_domain), "COLUMNS": "220"}
    out = tmp_path / "up"
    up = subprocess.run([homie, "up", "sim", "--task", TASK, "--partner-planner", "expert", "--mode", "centralized",
                         "--record", "--out", str(out), "--domain-id", str(ros_domain), "--timeout", "240"],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=420)
    assert up.returncode == 0, up.stderr[-4000:]
    result = json.loads((out / "result.json").read_text())
    assert _result_signature(result["rounds"]) == _signature(expected.rounds)
    assert _result_signature(result["partner_rounds"]) == _signature(expected.partner_rounds)
    assert result["partner_planner"] == expected.partner_planner
    # The record keeps the pair's run configuration (the one build path's); homie run, one agent, refuses it in a line.
    record = out / "record" / "summary.json"
    run = json.loads(record.read_text())["run"]
    assert run["partner"] == {"planner": "expert", "mode": "centralized"} and run["simulator"]["human"] is True
    assert run["planner"] == {"name": "partnr_expert"} and run["task"] == TASK
    again = subprocess.run([homie, "run", "--config", str(record), "--out", str(tmp_path / "again")],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert again.returncode == 2 and again.stderr.startswith("error: --config:") and "two-agent run" in again.stderr
    assert again.stderr.strip().count("\n") == 0 and not (tmp_path / "again").exists()
    printed = up.stderr
    robot_heading = f"robot ({result['planner']}): {len(expected.rounds)} rounds"
    human_heading = f"human ({result['partner_planner']}): {len(expected.partner_rounds)} rounds"
    assert robot_heading in printed and human_heading in printed, printed[-4000:]
    assert "Turn on" in printed.split(human_heading)[1]  # the human's table, after its heading, has its switch
    assert f"rounds={len(expected.rounds)}+{len(expected.partner_rounds)} (robot+human)" in printed

    report_path = tmp_path / "replay.json"
    replay = subprocess.run([homie, "bag", "replay", str(out / "bag"), "--mode", "centralized", "--min-agreement", "1.0",
                             "--out", str(report_path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=300)
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert [r["recorded"] for r in report["rounds"]] == [r.subtask_text for r in expected.rounds]
    assert [r["recorded"] for r in report["partner_rounds"]] == [r.subtask_text for r in expected.partner_rounds]
    assert report["agreement"] == report["partner_agreement"] == 1.0
    # homie bag info names both agents' rounds of the episode.
    info = subprocess.run([homie, "bag", "info", str(out / "bag"), "--json"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    episode = json.loads(info.stdout)["episode"]
    assert (episode["planner_outputs"], episode["partner_planner_outputs"]) == (len(expected.rounds),
                                                                                len(expected.partner_rounds))
    assert "the human's rounds with expert: 100%" in replay.stdout
    # A mode that does not exist is refused in one line (exit 2).
    refused = subprocess.run([homie, "bag", "replay", str(out / "bag"), "--mode", "joint"], capture_output=True,
                             text=True, env=env, cwd=tmp_path, timeout=300)
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(errors) == 1 and errors[0].startswith("error:"), refused.stderr

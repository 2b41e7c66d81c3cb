"""The planner starts an episode only when every node it awaits has reported ready (``/homie/ready``, a
handshake over DDS discovery, not a sleep): perception started last, late, on a machine kept busy, is still
part of the episode, and the episode's last world graph holds its result."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from homiebot.testing.ros_helpers import WireListener, graph_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

TASK = "demo-green-can"
PERCEPTION_DELAY_S = 6.0


def _logs(path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(path.glob("*/*.log")))


def test_perception_started_last_under_load_is_part_of_the_episode(tmp_path, ros_domain) -> None:
    from homie_msgs.msg import EpisodeStatus, PlannerOutput, WorldGraph
    from std_msgs.msg import String

    from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, READY_TOPIC
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    graph = load_graph()
    others = [n for n in graph.nodes if n.name != "perception"]
    env = graph_environment(ros_domain)
    planner = {"task": TASK, "exit_when_done": True, "await_nodes": ",".join(n.name for n in graph.nodes
                                                                              if n.name != "planner_node")}
    main = Supervisor(GraphSpec(nodes=others), overrides={"planner_node": planner}, env=env,
                      log_dir=tmp_path / "main" / "logs")
    late = Supervisor(GraphSpec(nodes=[graph.node("perception")]), env=env, log_dir=tmp_path / "late" / "logs")
    ready_qos = EVENTS_QOS  # transient local with a deep history: every node's name
    listener = WireListener({
        READY_TOPIC: (String, ready_qos),
        "/homie/planner_output": (PlannerOutput, EVENTS_QOS),
        "/homie/episode_status": (EpisodeStatus, EVENTS_QOS),
        "/perception/world_graph": (WorldGraph, LATCHED_QOS),
    })
    # Two busy processes keep both cores loaded for the whole test (the machine of the failing runs).
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        main.start()
        time.sleep(PERCEPTION_DELAY_S)
        assert not listener.get("/homie/planner_output"), "the planner started before perception was up"
        late.start()
        ended_by = main.run(lambda: False, timeout_s=240)
        listener.wait_for(lambda: any(any(n.name == "green_can" for n in g.nodes) and any(e.relation == "in" for e in g.edges)
                                      for g in listener.get("/perception/world_graph")), 20.0)
    finally:
        for process in load:
            process.kill()
            process.wait()
        late.stop()
        main.stop()
        listener.close()
    logs = _logs(tmp_path)
    assert ended_by is not None and ended_by.spec.name == "planner_node" and ended_by.exit_codes[-1] == 0, logs
    ready = {msg.data for msg in listener.get(READY_TOPIC)}
    assert ready >= {n.name for n in graph.nodes if n.name != "planner_node"}, ready
    statuses = listener.get("/homie/episode_status")
    assert statuses[-1].state == EpisodeStatus.ENDED and statuses[-1].goal == EpisodeStatus.GOAL_MET, logs
    # Perception heard the whole episode: its last graph (after the final round) holds the can in the drawer.
    graphs = listener.get("/perception/world_graph")
    assert graphs and graphs[-1].nodes, "no world graph, or one without objects"
    names = {n.id: n.name for n in graphs[-1].nodes}
    assert any(names.get(e.source) == "green_can" and e.relation == "in" for e in graphs[-1].edges), logs


def test_a_node_that_never_gets_ready_fails_the_episode_with_its_name(tmp_path, ros_domain) -> None:
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    graph = load_graph()
    nodes = [n for n in graph.nodes if n.name != "perception"]
    planner = {"task": TASK, "exit_when_done": True, "await_nodes": "sim_bridge,perception", "ready_timeout_s": 5.0}
    supervisor = Supervisor(GraphSpec(nodes=nodes), overrides={"planner_node": planner},
                            env=graph_environment(ros_domain), log_dir=tmp_path / "logs")
    try:
        supervisor.start()
        ended_by = supervisor.run(lambda: False, timeout_s=120)
    finally:
        supervisor.stop()
    log = (tmp_path / "logs" / "planner_node.log").read_text()
    assert ended_by is not None and ended_by.spec.name == "planner_node" and ended_by.exit_codes[-1] == 1, log[-3000:]
    assert "perception did not report ready within 5 s" in log and "sim_bridge" not in log.split("did not report")[0][-40:]

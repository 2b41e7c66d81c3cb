"""Actions into the world graph through the ROS 2 graph (homiebot/ros/perception_actions.py; docs/ros.md, "Actions
into the world graph"): the perception node applies a successful subtask handed over on ``/perception/apply_action``
before the views after it, as one process records an action before it observes, and places a Put's object where the
hand let go (``released_at``).

The node alone, fed what the embedded simulator gives for emmoe-040's apple on the tv stand: the four views before,
the state and views after the oracle Go to, then after the Pick (the apple seen in the hand). Fused before the Pick is
applied, the apple in the hand becomes a second apple node, which is what the round's ``/homie/episode_status`` did,
coming after the views (physical emmoe-049 through the graph put ``sponge_2`` where one process puts ``sponge_1``).
"""

from __future__ import annotations

import pytest

from homiebot.testing.ros_helpers import TopicClient, assert_clean_exit, graph_environment, stop_graph

pytestmark = [pytest.mark.ros, pytest.mark.slow]

TASK = "emmoe-040"  # apartment_5: apple_2 on the tv stand, in the first views
APPLE = "apple_2"


@pytest.fixture(scope="module")
def pick_sequence():
    """Scene, (state, views) before, after the Go to and after the Pick of the apple, and the state after its Put back
    where it was (oracle skills)."""
    from homiebot.sim.base import make_simulator
    from homiebot.sim.mujoco.rendering import RendererUnavailable
    from homiebot.skills.skillset import SkillSet
    from homiebot.tasks.suite import get_task
    from homiebot.types import Action

    try:
        sim = make_simulator("mujoco")
    except RendererUnavailable as err:
        pytest.skip(str(err))
    try:
        task = get_task(TASK)
        steps = [(None, sim.reset(task.scene, seed=task.seed))]
        steps[0] = (sim.state(), steps[0][1])
        skills = SkillSet(sim, noise=None, seed=0)
        for action in (Action.GO_TO, Action.PICK):
            assert skills.run(action, "oracle", APPLE, None).success
            steps.append((sim.state(), sim.observe()))
        assert steps[-1][0].held == APPLE
        stand = steps[0][0].entities[APPLE].parent
        assert stand is not None and skills.run(Action.PUT, "oracle", APPLE, stand).success
        yield sim.scene_spec(), steps, sim.state()
    finally:
        sim.shutdown()


def _apples(graph) -> list[str]:
    return sorted(n.name for n in graph.nodes if n.kind == "object" and n.category == "apple")


def test_an_action_handed_over_before_the_views_keeps_the_held_apple_one_node(tmp_path, ros_domain, pick_sequence):
    from homie_msgs.msg import EpisodeStatus, Feedback, WorldGraph
    from homie_msgs.srv import ApplyAction, ResolveTarget
    from std_msgs.msg import String

    from homiebot.perception.world_graph import NodeKind
    from homiebot.perception.world_model import PerceptionConfig, WorldModel
    from homiebot.ros import convert
    from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, VIEWS_QOS
    from homiebot.ros.perception_actions import APPLY_ACTION, apply_action_request
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph
    from homiebot.types import Action, Subtask

    spec, steps, s3 = pick_sequence
    (s0, v0), (s1, v1), (s2, v2) = steps
    stand = s0.entities[APPLE].parent
    x, y, z = s3.entities[APPLE].position
    released = (x + 0.05, y - 0.03, z + 0.02)  # where the hand let go, not where the views will see the apple
    # One process: the Pick recorded before the views after it (the loop's order) keeps one apple; the views first
    # make a second one (the order the round's status gave through the graph).
    expected = {}
    for order in ("action first", "views first"):
        model = WorldModel(spec, s0, PerceptionConfig(builder="conceptgraph", semantic_grounding=False))
        model.observe(v0, s0)
        model.observe(v1, s1)
        name = next(n.name for n in model.graph.nodes(NodeKind.OBJECT) if n.category == "apple")
        assert model.grounder().ground(name, s1).instance == APPLE  # the executor grounds before the Pick
        if order == "action first":
            model.record_action(Action.PICK, APPLE, None, s2)
            model.observe(v2, s2)
            assert model.grounder().ground(name, s2).instance == APPLE  # ... and before the Put
            model.record_action(Action.PUT, APPLE, stand, s3, released_at=released)
            put = model.node_for_instance(APPLE, s3)
            assert put is not None and put.position == released
        else:
            model.observe(v2, s2)
            model.record_action(Action.PICK, APPLE, None, s2)
        expected[order] = sorted(n.name for n in model.graph.nodes(NodeKind.OBJECT) if n.category == "apple")
    assert len(expected["action first"]) == 1 and len(expected["views first"]) == 2, expected

    nodes = [n for n in load_graph().nodes if n.name == "perception"]
    supervisor = Supervisor(GraphSpec(nodes=nodes), overrides={"perception": {"builder": "conceptgraph"}},
                            env=graph_environment(ros_domain), log_dir=tmp_path / "logs")
    client = None
    try:
        supervisor.start()
        client = TopicClient("perception_actions_test", {"/perception/world_graph": (WorldGraph, LATCHED_QOS)})
        apply = client.node.create_client(ApplyAction, APPLY_ACTION)
        assert apply.wait_for_service(timeout_sec=60), "no ApplyAction service"
        resolve = client.node.create_client(ResolveTarget, "/perception/resolve_target")

        def ground(word: str) -> str:
            """What the planner node and the executor ask before a goal (it also tells the graph which node the
            action is about)."""
            answer = client.wait(resolve.call_async(ResolveTarget.Request(name=word)), 30)
            assert answer.found, word
            return answer.instance
        scene_pub = client.node.create_publisher(String, "/sim/scene_description", LATCHED_QOS)
        state_pub = client.node.create_publisher(type(convert.world_state_to_msg(s0)), "/sim/world_state", EVENTS_QOS)
        views_pub = client.node.create_publisher(type(convert.observation_to_msg(v0)), "/homie/views", VIEWS_QOS)
        status_pub = client.node.create_publisher(EpisodeStatus, "/homie/episode_status", EVENTS_QOS)
        graphs = client.messages["/perception/world_graph"]

        def state_msg(state, sequence):
            msg = convert.world_state_to_msg(state)
            msg.state_sequence = sequence
            return msg

        def fuse(views, sequence: int):
            """Publish ``views`` (of the state ``sequence``) and wait for the graph the node makes of them."""
            msg = convert.observation_to_msg(views)
            msg.state_sequence = sequence
            count = len(graphs)
            views_pub.publish(msg)
            assert client.spin_until(lambda: len(graphs) > count, 30.0), f"no graph of the views of state {sequence}"

        def start(first_sequence: int):
            """A new scene description (the node starts a new graph), the first state and the views up to the apple's
            Go to."""
            scene_pub.publish(String(data=spec.model_dump_json()))
            client.spin_until(lambda: False, 1.0)
            state_pub.publish(state_msg(s0, first_sequence))
            client.spin_until(lambda: False, 0.5)
            fuse(v0, first_sequence)
            state_pub.publish(state_msg(s1, first_sequence + 1))
            client.spin_until(lambda: False, 0.3)
            fuse(v1, first_sequence + 1)
            assert len(_apples(graphs[-1])) == 1

        # The round's status after the views (the order before the handover): a second apple.
        start(1)
        assert ground(name) == APPLE
        state_pub.publish(state_msg(s2, 3))
        client.spin_until(lambda: False, 0.3)
        fuse(v2, 3)
        status = EpisodeStatus(task_id=TASK, state=EpisodeStatus.RUNNING, round_index=2, last_subtask=f"[Pick, {APPLE}]",
                               last_feedback=Feedback(code=Feedback.OK, message="None"))
        status_pub.publish(status)
        client.spin_until(lambda: False, 1.0)
        assert _apples(graphs[-1]) == expected["views first"]

        # The handover before the views: one apple, held.
        start(4)
        assert ground(name) == APPLE
        state_pub.publish(state_msg(s2, 6))
        request = apply_action_request(Subtask("Pick", APPLE), 2, state_msg(s2, 6), None)
        answer = client.wait(apply.call_async(request), 30)
        assert answer.applied and answer.changed, answer
        fuse(v2, 6)
        assert _apples(graphs[-1]) == expected["action first"]
        held = {e.source for e in graphs[-1].edges if e.relation == "held_by"}
        assert [n.name for n in graphs[-1].nodes if n.id in held] == expected["action first"]
        # The round's status after it changes nothing more (the round was applied once).
        count = len(graphs)
        status_pub.publish(status)
        client.spin_until(lambda: False, 1.0)
        assert len(graphs) == count

        # The Put with the point where the hand let go: the apple's node is there, on the stand, before any view.
        assert ground(name) == APPLE
        state_pub.publish(state_msg(s3, 7))
        request = apply_action_request(Subtask("Put", APPLE, stand), 3, state_msg(s3, 7), released)
        answer = client.wait(apply.call_async(request), 30)
        assert answer.applied and answer.changed, answer
        assert client.spin_until(lambda: len(graphs) > count, 10.0), "no graph after the Put"
        apple = next(n for n in graphs[-1].nodes if n.name == expected["action first"][0])
        assert convert.point_tuple(apple.pose.position) == released
        placed = [e.relation for e in graphs[-1].edges if e.source == apple.id and e.relation in ("on", "in", "held_by")]
        assert placed == ["on"], placed
    finally:
        codes = stop_graph(supervisor, client)
    assert_clean_exit(codes, tmp_path / "logs")


def test_physical_put_places_the_object_where_the_hand_let_go_and_the_graph_gives_one_process_rounds(tmp_path,
                                                                                                     ros_domain):
    """emmoe-049 (bowl and sponge from the sink onto the counter) with ``--skills physical --perception conceptgraph``
    through the graph: the rounds are ``homie run``'s, names included (the held sponge stays ``sponge_1``), and each
    Put's release point, from the manipulation executor's physical skill, reaches perception's graph: the perception
    node logs it, a published world graph has the object's node exactly there, and the object came to rest under it."""
    import json
    import re
    import subprocess
    import sys
    from pathlib import Path

    from homie_msgs.msg import WorldGraph
    from homie_msgs.msg import WorldState as WorldStateMsg
    from rclpy.serialization import deserialize_message

    from homiebot.ros.bag import read_messages

    homie = str(Path(sys.executable).with_name("homie"))
    task = "emmoe-049"
    env = {**graph_environment(ros_domain), "COLUMNS": "200"}
    graph, alone = tmp_path / "graph", tmp_path / "in_process"
    done = subprocess.run([homie, "up", "sim", "--task", task, "--skills", "physical", "--perception", "conceptgraph",
                           "--record", "--no-images", "--out", str(graph), "--domain-id", str(ros_domain)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([homie, "run", "--task", task, "--skills", "physical", "--perception", "conceptgraph",
                           "--out", str(alone)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    def rounds(record: Path) -> list[dict]:
        return [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]

    def signature(record: Path) -> list[tuple]:
        return [(r["subtask_text"], r["error_code"], r["feedback"], r.get("grounded_subtask")) for r in rounds(record)]

    assert json.loads((graph / "record" / "summary.json").read_text())["success"]
    assert signature(graph / "record") == signature(alone)
    assert any(r["subtask_text"].startswith("[Put, sponge_1,") for r in rounds(graph / "record"))

    log = (graph / "logs" / "perception.log").read_text(errors="replace")
    logged = {int(m.group(1)): (m.group(2), tuple(float(v) for v in m.group(3).split(", ")))
              for m in re.finditer(r"round (\d+) \[Put, [^\]]+\]: (\S+) placed where the hand let go, \(([^)]*)\)", log)}
    puts = {r["round"]: r for r in rounds(graph / "record") if r["subtask_text"].startswith("[Put,")}
    assert sorted(logged) == sorted(puts), (logged, sorted(puts))
    messages = read_messages(graph / "bag", ["/perception/world_graph", "/sim/world_state"])
    graphs = [deserialize_message(m.data, WorldGraph) for m in messages if m.topic == "/perception/world_graph"]
    final = [deserialize_message(m.data, WorldStateMsg) for m in messages if m.topic == "/sim/world_state"][-1]
    rest = {e.name: (e.position.x, e.position.y, e.position.z) for e in final.entities}
    for index, (node, point) in logged.items():
        instance = puts[index]["grounded_subtask"]["target"]
        # The physical release point: over where the object then rests (it is let go a little above the surface).
        x, y, z = rest[instance]
        assert abs(point[0] - x) < 0.05 and abs(point[1] - y) < 0.05 and -0.01 <= point[2] - z < 0.08, (point, rest[instance])
        # ... and perception's graph had the object's node there (until the views after it localised it again).
        positions = [(n.pose.position.x, n.pose.position.y, n.pose.position.z) for g in graphs for n in g.nodes
                     if n.name == node]
        assert any(max(abs(a - b) for a, b in zip(p, point, strict=True)) < 1e-4 for p in positions), (node, point)

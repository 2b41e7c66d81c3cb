"""The perception node alone in its own process, with the image-built (ConceptGraphs-style) graph: fed one
scene, one state and one four-view message from the embedded simulator, it publishes a graph with its own node
names and grounds those names, over ResolveTarget, to the simulator instances the nodes stand for."""

from __future__ import annotations

import pytest

from homiebot.testing.ros_helpers import TopicClient, assert_clean_exit, graph_environment, stop_graph

pytestmark = [pytest.mark.ros, pytest.mark.slow]

TASK = "emmoe-040"  # apartment_5: the apple seen on the tv stand is the simulator's apple_2 (apple_1: in the fridge)


@pytest.fixture(scope="module")
def start_of_task():
    """Scene, state and the first four views of TASK (rendered here, in the test's process)."""
    from homiebot.sim.base import make_simulator
    from homiebot.sim.mujoco.rendering import RendererUnavailable
    from homiebot.tasks.suite import get_task

    try:
        sim = make_simulator("mujoco")
    except RendererUnavailable as err:
        pytest.skip(str(err))
    try:
        task = get_task(TASK)
        observation = sim.reset(task.scene, seed=task.seed)
        yield sim.scene_spec(), sim.state(), observation
    finally:
        sim.shutdown()


def test_conceptgraph_node_publishes_its_own_names_and_grounds_them(tmp_path, ros_domain, start_of_task):
    from homie_msgs.msg import WorldGraph
    from homie_msgs.srv import ResolveTarget
    from std_msgs.msg import String

    from homiebot.perception.world_model import PerceptionConfig, WorldModel
    from homiebot.ros import convert
    from homiebot.ros.calls import EVENTS_QOS, LATCHED_QOS, VIEWS_QOS
    from homiebot.ros.supervisor import GraphSpec, Supervisor, load_graph

    spec, state, observation = start_of_task
    # What the node should answer: the core's world model fed the same scene, state and views, in-process.
    expected = WorldModel(spec, state, PerceptionConfig(builder="conceptgraph", semantic_grounding=False))
    expected.observe(observation, state)
    words = ["apple_1", "the tv stand", "banana", "laptop"]
    answers = {w: expected.grounder().ground(w, state).instance for w in words}
    assert answers["apple_1"] == "apple_2" and answers["laptop"] is None

    nodes = [n for n in load_graph().nodes if n.name == "perception"]
    supervisor = Supervisor(GraphSpec(nodes=nodes), overrides={"perception": {"builder": "conceptgraph"}},
                            env=graph_environment(ros_domain), log_dir=tmp_path / "logs")
    client = None
    try:
        supervisor.start()
        client = TopicClient("perception_test", {"/perception/world_graph": (WorldGraph, LATCHED_QOS)})
        resolve = client.node.create_client(ResolveTarget, "/perception/resolve_target")
        assert resolve.wait_for_service(timeout_sec=60), "no ResolveTarget service"
        state_msg = convert.world_state_to_msg(state)
        state_msg.state_sequence = 1
        views_msg = convert.observation_to_msg(observation)
        views_msg.state_sequence = 1
        scene_pub = client.node.create_publisher(String, "/sim/scene_description", LATCHED_QOS)
        state_pub = client.node.create_publisher(type(state_msg), "/sim/world_state", EVENTS_QOS)
        views_pub = client.node.create_publisher(type(views_msg), "/homie/views", VIEWS_QOS)
        # The scene, then the state, then the views (the node builds its model from the first state of the scene).
        scene_pub.publish(String(data=spec.model_dump_json()))
        client.spin_until(lambda: False, 1.0)
        state_pub.publish(state_msg)
        client.spin_until(lambda: False, 0.5)
        views_pub.publish(views_msg)
        assert client.spin_until(lambda: client.messages["/perception/world_graph"], 30.0), "no graph published"
        graph = client.messages["/perception/world_graph"][-1]
        assert sorted(n.name for n in graph.nodes) == sorted(n.name for n in expected.graph.nodes())
        apple = next(n for n in graph.nodes if n.category == "apple")
        assert apple.name == "apple_1"  # the graph's own numbering: the first apple it found
        for word, instance in answers.items():
            answer = client.wait(resolve.call_async(ResolveTarget.Request(name=word)), 30)
            assert (answer.instance if answer.found else None) == instance, (word, answer)
        answer = client.wait(resolve.call_async(ResolveTarget.Request(name="apple_1")), 30)
        # the pose is where perception has the apple on the stand (its visible surface), not the fridge's apple
        assert abs(answer.pose.pose.position.x - state.entities["apple_2"].position[0]) < 0.1
    finally:
        codes = stop_graph(supervisor, client)
    assert_clean_exit(codes, tmp_path / "logs")

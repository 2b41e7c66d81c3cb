"""call_action recovers a goal whose answer (or whose request) was lost, and never runs a goal twice.

A real rclpy action server and client over DDS in this process; the loss is made on the client's side by
an ActionClient that drops the future of its first goal (the answer arrives and is ignored, as when
rmw_fastrtps drops an answer to a reader it has not matched yet) or does not send the first goal at all.
"""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.ros


class LossyActionClient:
    """Wraps an rclpy ActionClient; the first goal's answer is lost ("answer") or its request ("request")."""

    def __init__(self, client, lose: str) -> None:
        self._client = client
        self.lose = lose
        self.sent = 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        from rclpy.task import Future

        self.sent += 1
        if self.sent == 1 and self.lose == "request":
            return Future()  # never sent, never answered
        future = self._client.send_goal_async(goal, feedback_callback=feedback_callback, goal_uuid=goal_uuid)
        return Future() if self.sent == 1 and self.lose == "answer" else future


@pytest.fixture
def graph(ros_domain, monkeypatch):
    import rclpy
    from homie_msgs.action import Navigate
    from homie_msgs.msg import SkillResult
    from rclpy.action import ActionClient, ActionServer, GoalResponse
    from rclpy.executors import SingleThreadedExecutor

    from homiebot.ros import calls

    monkeypatch.setattr(calls, "GOAL_ANSWER_WAIT_S", 0.3)
    context = rclpy.Context()
    rclpy.init(context=context)
    server_node = rclpy.create_node("calls_server", context=context)
    client_node = rclpy.create_node("calls_client", context=context)
    executed: list[str] = []

    def execute(goal_handle):
        executed.append(goal_handle.request.target)
        goal_handle.succeed()
        return Navigate.Result(result=SkillResult(status=SkillResult.SUCCESS, detail=f"at {goal_handle.request.target}"))

    def accept(goal):
        return GoalResponse.REJECT if goal.target == "nowhere" else GoalResponse.ACCEPT

    server = ActionServer(server_node, Navigate, "/calls_test/navigate", execute, goal_callback=accept)
    client = ActionClient(client_node, Navigate, "/calls_test/navigate")
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(server_node)
    executor.add_node(client_node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    assert client.wait_for_server(timeout_sec=10.0)
    yield client, executed, Navigate
    executor.shutdown()
    server.destroy()
    client.destroy()
    rclpy.try_shutdown(context=context)
    spinner.join(timeout=5)


def test_plain_goal(graph):
    from homiebot.ros.calls import call_action

    client, executed, Navigate = graph
    assert call_action(client, Navigate.Goal(target="fridge"), 10.0).result.detail == "at fridge"
    assert executed == ["fridge"]


@pytest.mark.parametrize("lose", ["answer", "request"])
def test_a_lost_goal_answer_or_request_is_recovered_and_runs_once(graph, lose):
    from homiebot.ros.calls import call_action

    client, executed, Navigate = graph
    lossy = LossyActionClient(client, lose)
    result = call_action(lossy, Navigate.Goal(target="sink"), 10.0)
    assert result.result.detail == "at sink"
    assert executed == ["sink"]  # run exactly once
    assert lossy.sent == (1 if lose == "answer" else 2)


def test_a_rejected_goal_fails_at_once(graph):
    import time

    from homiebot.ros.calls import CallFailed, call_action

    client, executed, Navigate = graph
    started = time.monotonic()
    with pytest.raises(CallFailed, match="rejected"):
        call_action(client, Navigate.Goal(target="nowhere"), 10.0)
    assert time.monotonic() - started < 0.3 and executed == []


def test_a_rejected_goal_whose_answer_was_lost_fails_too(graph):
    from homiebot.ros.calls import CallFailed, call_action

    client, executed, Navigate = graph
    with pytest.raises(CallFailed, match="rejected"):
        call_action(LossyActionClient(client, "answer"), Navigate.Goal(target="nowhere"), 10.0)
    assert executed == []


def test_an_unanswered_idempotent_service_call_is_sent_again(ros_domain, monkeypatch):
    """The first request's answer never comes (the server drops it); the call asks again and gets the second."""
    import rclpy
    from homie_msgs.srv import GetWorldState
    from rclpy.executors import SingleThreadedExecutor

    from homiebot.ros import calls

    monkeypatch.setattr(calls, "GOAL_ANSWER_WAIT_S", 0.3)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("calls_service", context=context)
    requests: list[int] = []

    def answer(request, response):
        requests.append(1)
        response.state.state_sequence = len(requests)
        return response

    # A service whose first answer is lost: rclpy sends the answer after the callback, so drop it by raising.
    def lossy(request, response):
        if not requests:
            requests.append(0)
            raise RuntimeError("answer lost")
        return answer(request, response)

    node.create_service(GetWorldState, "/calls_test/state", lossy)
    client = node.create_client(GetWorldState, "/calls_test/state")
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=lambda: _spin_quietly(executor), daemon=True)
    spinner.start()
    try:
        response = calls.call_service(client, GetWorldState.Request(), 10.0)
        assert response.state.state_sequence == 2 and len(requests) == 2
        with pytest.raises(calls.CallTimeout, match="within 0.2 s"):
            requests.clear()
            calls.call_service(client, GetWorldState.Request(), 0.2, idempotent=False)
    finally:
        executor.shutdown()
        rclpy.try_shutdown(context=context)
        spinner.join(timeout=5)


def _spin_quietly(executor) -> None:
    """Spin, swallowing the service callback's deliberate error (rclpy re-raises it from spin)."""
    while True:
        try:
            executor.spin()
            return
        except RuntimeError:
            continue
        except Exception:
            return

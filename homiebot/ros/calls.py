"""Blocking service and action calls with deadlines, for code that runs beside an rclpy executor.

rclpy's ``call_async`` / ``send_goal_async`` return futures that the executor completes. The nodes here
wait on those futures from a worker thread that does *not* spin (the planner's episode thread, the
executor node's subtask thread) while the node's single-threaded executor spins elsewhere, so a plain
``threading.Event`` is the right wait. Never call these from the executor's own thread: nothing would
complete the future.

Every wait has a deadline. A server that died mid-call shows up as :class:`CallTimeout` at the deadline,
never as a hang: that is what lets the planner report a crashed executor as a timeout.

A lost goal answer is recovered, not waited out. rmw_fastrtps sends a service answer only once the server
has matched the caller's reply reader, and gives up after about 100 ms ("failed to send response
(timeout)"); discovery is asymmetric, so the first goal sent to a freshly started server under load can be
accepted and executed while its answer is dropped (ros2/ros2#1253). :func:`call_action` therefore names the
goal itself and, when the answer has not come within :data:`GOAL_ANSWER_WAIT_S`, asks for that goal's
result: a server that has the goal answers with its result when done; one that never got it answers
"unknown", and the goal is sent again under the same id, which a server that did get it in the meantime
rejects as a duplicate instead of running it twice.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.client import Client
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from unique_identifier_msgs.msg import UUID

#: Latched topic (std_msgs/String) on which every node of the graph says its name once it can do its work: its
#: services and actions exist and, for a node that needs other nodes' topics, its subscriptions have matched
#: their publishers. The planner starts an episode only once every node it awaits has said so (a handshake
#: over DDS discovery, not a sleep: under load a niced node can take many seconds to start).
READY_TOPIC = "/homie/ready"

#: How long a goal's answer (accepted / rejected) may take before the goal's result is asked for instead.
GOAL_ANSWER_WAIT_S = 2.0

#: Latched topics (task, scene description, world state): late joiners get the last message.
LATCHED_QOS = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    reliability=ReliabilityPolicy.RELIABLE,
)
#: Episode events (planner outputs, episode status): reliable, and the last 100 kept for late joiners (a
#: recorder, perception or a monitor started mid-episode still sees the whole episode so far).
EVENTS_QOS = QoSProfile(
    depth=100,
    history=HistoryPolicy.KEEP_LAST,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    reliability=ReliabilityPolicy.RELIABLE,
)
#: The four views (homie_msgs/MultiView): reliable, and the last few kept for late joiners (rviz, a recorder,
#: perception started after the first render), so that the start views of an episode are not lost to discovery.
VIEWS_QOS = QoSProfile(
    depth=8,
    history=HistoryPolicy.KEEP_LAST,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    reliability=ReliabilityPolicy.RELIABLE,
)
#: Sensor streams (images, odometry): reliable, with a queue long enough for a recorder writing to disk.
SENSOR_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)


class CallTimeout(TimeoutError):
    """A service or action did not answer within its deadline (server absent, dead or too slow)."""


class CallFailed(RuntimeError):
    """A goal was rejected or ended without a result (aborted / canceled)."""


def wait_future(future: Future, timeout_s: float, what: str) -> Any:
    """Wait for an rclpy future from a non-spinning thread; raise :class:`CallTimeout` at the deadline."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout=max(timeout_s, 0.0)):
        future.cancel()
        raise CallTimeout(f"{what}: no answer within {timeout_s:.1f} s")
    exception = future.exception()
    if exception is not None:
        raise CallFailed(f"{what}: {exception}") from exception
    return future.result()


def wait_for_server(ready: Callable[[float], bool], timeout_s: float, what: str) -> None:
    """``ready`` is ``client.wait_for_service`` or ``action_client.wait_for_server``."""
    if not ready(max(timeout_s, 0.0)):
        raise CallTimeout(f"{what}: server not available within {timeout_s:.1f} s")


def call_service(client: Client, request: Any, timeout_s: float, idempotent: bool = True) -> Any:
    """One service call with a deadline that covers discovery and the answer.

    An idempotent request (every service of the graph: reset to a scene and seed, state, views, grounding)
    is sent again when its answer has not come within :data:`GOAL_ANSWER_WAIT_S`: the answer may have been
    dropped (module docstring), and asking twice is harmless.
    """
    deadline = time.monotonic() + timeout_s
    name = client.srv_name
    if not client.service_is_ready():
        wait_for_server(client.wait_for_service, timeout_s, f"service {name}")
    while True:
        remaining = deadline - time.monotonic()
        wait = min(GOAL_ANSWER_WAIT_S, remaining) if idempotent else remaining
        try:
            return wait_future(client.call_async(request), wait, f"service {name}")
        except CallTimeout:
            if wait >= remaining:
                raise CallTimeout(f"service {name}: no answer within {timeout_s:.1f} s") from None


def _in_executor(client: ActionClient, send: Callable[[], Future], deadline: float, what: str) -> Future:
    """Run ``send`` (``send_goal_async`` / ``get_result_async``) on the thread that spins the node.

    rclpy's ActionClient sends a request and only then files its future under the request's sequence
    number, without a lock (rclpy 7.1; service clients do lock). Called from another thread, a fast server's
    answer can be taken by the executor in between, is dropped as "unexpected", and the call waits for
    ever: seen here after a few hundred goals. On the executor's own thread the two steps cannot be split.
    """
    executor = client._node.executor  # rclpy exposes no public accessor
    if executor is None:
        return send()
    return wait_future(executor.create_task(send), deadline - time.monotonic(), what)


def call_action(
    client: ActionClient,
    goal: Any,
    timeout_s: float,
    feedback_callback: Callable[[Any], None] | None = None,
) -> Any:
    """Send one goal and wait for its result within ``timeout_s`` (discovery, acceptance and execution).

    Returns the action's Result message; a goal that ends other than succeeded raises :class:`CallFailed`.
    At the deadline the goal is canceled (best effort: the server may be gone) and :class:`CallTimeout` is
    raised. A lost goal answer is recovered (module docstring).
    """
    status, result = call_action_status(client, goal, timeout_s, feedback_callback)
    if status != GoalStatus.STATUS_SUCCEEDED:
        raise CallFailed(f"action {client._action_name}: goal ended with status {status}")
    return result


def call_action_status(
    client: ActionClient,
    goal: Any,
    timeout_s: float,
    feedback_callback: Callable[[Any], None] | None = None,
) -> tuple[int, Any]:
    """As :func:`call_action`, for actions whose failures carry a result (Nav2's and ros2_control's abort a goal
    with an error code in it): the goal's final status (``GoalStatus.STATUS_*``) and its Result message.
    A rejected goal still raises :class:`CallFailed`."""
    deadline = time.monotonic() + timeout_s
    name = client._action_name  # rclpy exposes no public accessor
    if not client.server_is_ready():
        wait_for_server(client.wait_for_server, timeout_s, f"action {name}")
    goal_id = UUID(uuid=list(uuid.uuid4().bytes))
    resent = False
    while True:
        goal_future = _in_executor(
            client, lambda: client.send_goal_async(goal, feedback_callback=feedback_callback, goal_uuid=goal_id),
            deadline, f"action {name} (goal)",
        )
        try:
            handle = wait_future(goal_future, min(GOAL_ANSWER_WAIT_S, deadline - time.monotonic()), f"action {name} (goal)")
        except CallTimeout:
            if time.monotonic() >= deadline:
                raise
            handle = None  # no answer yet: ask for the goal's result (module docstring)
        if handle is not None and not handle.accepted and not resent:
            raise CallFailed(f"action {name}: goal rejected")
        if handle is None or not handle.accepted:  # unanswered, or a resent goal the server already has
            handle = ClientGoalHandle(client, goal_id, client._action_type.Impl.SendGoalService.Response(accepted=True))
        try:
            result_future = _in_executor(client, functools.partial(client._get_result_async, handle), deadline, f"action {name} (result)")
            response = wait_future(result_future, deadline - time.monotonic(), f"action {name} (result)")
        except CallTimeout:
            handle.cancel_goal_async()
            raise
        if response.status != GoalStatus.STATUS_UNKNOWN:
            break
        if resent:  # sent twice, unknown twice: the server rejected it
            raise CallFailed(f"action {name}: goal rejected")
        resent = True  # the server never got the goal: send it again under the same id
    return int(response.status), response.result


def announce_ready(node: Any, ready: Callable[[], bool] | None = None, period_s: float = 0.1) -> Any:
    """Publish the node's name on :data:`READY_TOPIC` (latched) now, or once ``ready()`` holds (polled by a
    timer on the node's executor). Returns the publisher (keep it alive with the node)."""
    from std_msgs.msg import String

    publisher = node.create_publisher(String, READY_TOPIC, LATCHED_QOS)
    if ready is None:
        publisher.publish(String(data=node.get_name()))
        return publisher
    timer: Any = None  # the rclpy timer, created below (check() runs only after that)

    def check() -> None:
        if ready():
            publisher.publish(String(data=node.get_name()))
            node.get_logger().info("ready: announced on " + READY_TOPIC)
            timer.cancel()

    from rclpy.clock import Clock, ClockType

    # A steady clock: with use_sim_time the node's own clock stands still until /clock moves, and /clock only
    # moves once an episode runs, which waits for this announcement.
    timer = node.create_timer(period_s, check, clock=Clock(clock_type=ClockType.STEADY_TIME))
    return publisher


class ReadinessWatch:
    """The names announced on :data:`READY_TOPIC` (a subscription of ``node``; its executor fills the set)."""

    def __init__(self, node: Any) -> None:
        from std_msgs.msg import String

        self._lock = threading.Lock()
        self.ready: set[str] = set()
        # Every node's writer keeps its own latched name; a deep reader history so that a burst of them (a late
        # planner meeting every node at once) is not cut down to the last one.
        qos = QoSProfile(depth=64, history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
        self._subscription = node.create_subscription(String, READY_TOPIC, self._on_ready, qos)

    def _on_ready(self, msg: Any) -> None:
        with self._lock:
            self.ready.add(msg.data)

    def missing(self, names: list[str]) -> list[str]:
        with self._lock:
            return [name for name in names if name not in self.ready]

    def wait(self, names: list[str], timeout_s: float) -> list[str]:
        """Wait until every one of ``names`` is ready; the ones still missing after ``timeout_s`` (none: all up)."""
        deadline = time.monotonic() + timeout_s
        while self.missing(names) and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.missing(names)

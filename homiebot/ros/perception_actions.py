"""Actions into the world graph through the ROS 2 graph (docs/ros.md, "Actions into the world graph").

In one process the loop tells perception of every successful subtask right after the execution and before it
observes again (:meth:`homiebot.agent.knowledge.PerceptionKnowledge.after_success`, which calls
:meth:`homiebot.perception.world_model.WorldModel.record_action` with the executor's grounding, the state after the
subtask and a Put's release point). The graph's planner node does the same over the perception node's
``/perception/apply_action`` (homie_msgs/ApplyAction): :class:`ActionHandover` sends the subtask in instance names,
the state the executor's result carried and the result's ``released_at``, and waits for the answer, before the
loop asks the sim bridge for the next views.

The order matters for what the next views add: after a Pick, the object in the hand is seen near the robot, and the
image-built graph takes it for the held node only once the Pick made that node held; fused first, it became a second
node (physical emmoe-049 through the graph put ``sponge_2`` where one process puts ``sponge_1``). The round's
``/homie/episode_status``, which perception also reads, comes after the views and the looks; a call answered before
the views are asked for does not depend on the order in which messages of two publishers arrive.
"""

from __future__ import annotations

import logging

from homie_msgs.msg import WorldState as WorldStateMsg
from homie_msgs.srv import ApplyAction
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from homiebot.ros import convert
from homiebot.ros.calls import call_service
from homiebot.types import Subtask

#: The perception node's service (ros2_ws/src/perception).
APPLY_ACTION = "/perception/apply_action"

log = logging.getLogger(__name__)


def apply_action_request(grounded: Subtask, round_index: int, state: WorldStateMsg,
                         released_at: tuple[float, float, float] | None) -> ApplyAction.Request:
    """The request for a successful subtask ``grounded`` in instance names, ``state`` the world after it (the
    executor's result's), ``released_at`` a Put's release point when the skill knew it."""
    request = ApplyAction.Request(subtask=convert.subtask_to_msg(grounded), round_index=int(round_index), state=state)
    request.has_released_at, request.released_at = convert.released_at_to_msg(released_at)
    return request


class ActionHandover:
    """The planner node's client of ``/perception/apply_action`` (module docstring).

    Args:
        node: the node that owns the client; its executor spins in another thread while :meth:`apply` waits.
        timeout_s: the deadline of the answer (discovery included).
    """

    def __init__(self, node: Node, timeout_s: float = 30.0, callback_group: CallbackGroup | None = None) -> None:
        self._client = node.create_client(ApplyAction, APPLY_ACTION, callback_group=callback_group)
        self.timeout_s = timeout_s

    def apply(self, grounded: Subtask, round_index: int, state: WorldStateMsg,
              released_at: tuple[float, float, float] | None) -> list[str]:
        """Hand perception the successful subtask; the graph nodes it changed. A perception without a graph of the
        scene yet changes nothing (logged): the views will bring the objects.

        Raises:
            CallTimeout: no answer in time (the perception node is gone)."""
        # Idempotent: the perception node applies a round once, so a request sent again after a lost answer is safe.
        response = call_service(self._client, apply_action_request(grounded, round_index, state, released_at),
                                self.timeout_s)
        if not response.applied:
            log.warning("round %d %s: perception did not apply it: %s", round_index, grounded.text(), response.error)
        return list(response.changed)

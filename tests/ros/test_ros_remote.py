"""RemoteSimulator (the executor node's world over the graph) asks the sim bridge for the state only when it
does not hold the current one: the goal's state, then each skill result's state, dropped at every subtask.

The service and action calls are replaced by a scripted bridge that counts them; the node, the clients and
the messages are real rclpy / homie_msgs objects.
"""

from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.ros


class ScriptedBridge:
    """Stands in for call_service / call_action: answers as the sim bridge does, numbering states."""

    def __init__(self, with_state: bool = True) -> None:
        self.sequence = itertools.count(1)
        self.state_calls = 0
        self.goals: list = []
        self.with_state = with_state
        self.fail_next_skill = False

    def state_msg(self, held: str = ""):
        from homie_msgs.msg import WorldState

        return WorldState(state_sequence=next(self.sequence), scene="apartment_1", held=held)

    def call_service(self, client, request, timeout_s):
        from homie_msgs.srv import GetWorldState

        self.state_calls += 1
        return GetWorldState.Response(state=self.state_msg())

    def call_action(self, client, goal, timeout_s):
        from homie_msgs.action import Manipulate, Navigate
        from homie_msgs.msg import SkillResult, WorldState

        self.goals.append(goal)
        if self.fail_next_skill:
            self.fail_next_skill = False
            raise TimeoutError("action /navigate: no answer within 0.1 s")
        action = Navigate if isinstance(goal, Navigate.Goal) else Manipulate
        state = self.state_msg(held="apple_1") if self.with_state else WorldState()
        return action.Result(result=SkillResult(status=SkillResult.SUCCESS), state=state)


@pytest.fixture
def remote(monkeypatch):
    import rclpy

    import homiebot.ros.remote as remote_module

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("remote_test", context=context)
    bridge = ScriptedBridge()
    monkeypatch.setattr(remote_module, "call_service", bridge.call_service)
    monkeypatch.setattr(remote_module, "call_action", bridge.call_action)
    sim = remote_module.RemoteSimulator(node)
    yield sim, bridge
    sim.shutdown()
    node.destroy_node()
    rclpy.try_shutdown(context=context)


def test_state_of_the_goal_is_used_without_asking_the_bridge(remote):
    sim, bridge = remote
    goal_state = bridge.state_msg()
    sim.begin_subtask("oracle", state=goal_state)
    assert sim.state().scene == "apartment_1"
    assert sim.current_state_msg().state_sequence == goal_state.state_sequence
    assert bridge.state_calls == 0


def test_skill_results_carry_the_state_after_the_skill(remote):
    sim, bridge = remote
    sim.begin_subtask("oracle", state=bridge.state_msg())
    sim.reset_arm()
    sim.pick("apple_1")
    assert bridge.goals[-1].reset_arm_first  # the deferred arm reset rode on the skill goal
    assert sim.state().held == "apple_1"
    assert sim.current_state_msg().state_sequence == 2
    assert bridge.state_calls == 0


def test_without_a_goal_state_the_bridge_is_asked_once(remote):
    sim, bridge = remote
    sim.begin_subtask("oracle")
    first = sim.state()
    assert sim.state() == first
    assert bridge.state_calls == 1


def test_a_new_subtask_drops_the_held_state(remote):
    sim, bridge = remote
    sim.begin_subtask("oracle", state=bridge.state_msg())
    sim.state()
    sim.begin_subtask("oracle")  # no state in this goal: whatever happened in between must be fetched
    sim.state()
    assert bridge.state_calls == 1


def test_a_failed_skill_call_leaves_the_state_unknown(remote):
    sim, bridge = remote
    sim.begin_subtask("oracle", state=bridge.state_msg())
    bridge.fail_next_skill = True
    with pytest.raises(TimeoutError):
        sim.go_to("fridge_1")
    sim.state()
    assert bridge.state_calls == 1


def test_a_pending_arm_reset_is_flushed_before_the_state_is_read(remote):
    from homie_msgs.action import Manipulate

    sim, bridge = remote
    sim.begin_subtask("oracle", state=bridge.state_msg())
    sim.reset_arm()
    state = sim.state()
    assert bridge.goals[-1].operation == Manipulate.Goal.RESET_ARM
    assert state.held == "apple_1" and bridge.state_calls == 0  # the reset's own result carried the state


def test_a_robot_side_without_states_in_results_is_asked(monkeypatch, remote):
    sim, bridge = remote
    bridge.with_state = False
    sim.begin_subtask("oracle", state=bridge.state_msg())
    sim.go_to("fridge_1")
    sim.state()
    assert bridge.state_calls == 1

"""Appendix D bookkeeping: inventory rules on the parsed action, the 3-round window, conversation.json."""

from __future__ import annotations

import pytest

from homiebot.planner.conversation import Conversation, update_inventory
from homiebot.types import ErrorCode, Subtask


def test_pick_success_appends_lower_cased_target():
    assert update_inventory((), Subtask("Pick", "Green_Can"), ErrorCode.OK) == ("green_can",)


def test_put_success_pops_last_item():
    assert update_inventory(("a", "b"), Subtask("Put", "b", "table"), ErrorCode.OK) == ("a",)


@pytest.mark.parametrize("code", [c for c in ErrorCode if c not in (ErrorCode.OK, ErrorCode.E2)])
def test_failures_leave_inventory_unchanged(code):
    assert update_inventory(("apple",), Subtask("Put", "apple", "fridge"), code) == ("apple",)
    assert update_inventory((), Subtask("Pick", "apple"), code) == ()


def test_put_with_missing_object_pops():
    assert update_inventory(("apple",), Subtask("Put", "apple", "fridge"), ErrorCode.E2) == ()


def test_decision_is_on_parsed_action_not_substrings():
    # The paper's `"pick" in subtask` would add/remove on these; parsed actions do not.
    assert update_inventory((), Subtask("Go to", "pickle_jar"), ErrorCode.OK) == ()
    assert update_inventory(("cup",), Subtask("Go to", "output_tray"), ErrorCode.OK) == ("cup",)
    assert update_inventory(("cup",), Subtask("Open", "computer_desk"), ErrorCode.OK) == ("cup",)


def test_pop_on_empty_inventory_is_a_no_op():
    assert update_inventory((), Subtask("Put", "apple", "fridge"), ErrorCode.OK) == ()


def test_unparsed_output_changes_nothing():
    assert update_inventory(("apple",), None, ErrorCode.F1) == ("apple",)


def test_window_keeps_last_three_rounds_oldest_first():
    conv = Conversation(window=3)
    for i in range(5):
        conv.append(f"i{i}", f"a{i}")
    assert [t.instruction for t in conv.recent()] == ["i2", "i3", "i4"]
    assert len(conv) == 5
    conv2 = Conversation(window=3)
    conv2.append("i0", "a0")
    assert [t.answer for t in conv2.recent()] == ["a0"]
    assert Conversation(window=0).recent() == ()


def test_paper_json_entries():
    conv = Conversation()
    conv.append("Task: x\n", "Analysis: y\nSubtask: [End]\nModel: None")
    assert conv.to_paper_json() == ["USER:\nTask: x\nASSISTANT:\nAnalysis: y\nSubtask: [End]\nModel: None\n"]
    assert conv.history_prompt() == conv.to_paper_json()[0]

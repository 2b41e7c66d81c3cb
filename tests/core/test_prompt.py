"""EMMOE prompt, instruction and output-parsing rules (appendices D and H.1)."""

from __future__ import annotations

from homiebot.planner.prompt import (
    build_instruction,
    format_inventory,
    format_output,
    history_entry,
    parse_output,
    split_subtask,
    system_prompt,
)
from homiebot.types import Subtask


def test_system_prompt_has_paper_lists_and_description():
    text = system_prompt()
    assert "choose your action from the action list [Go to, Pick, Put, Open, Close, End]" in text
    assert "Choose one most suitable model in the model list [NoMaD, PixNav, octo, RT-1-X]." in text
    assert "RT-1-X is good at picking and putting." in text
    assert text.startswith("You are a powerful housework assistant")
    assert text.endswith("Now, I will send the message so that you can make planning accordingly.")


def test_system_prompt_uses_configured_lists():
    text = system_prompt(actions=("Go to", "Pick", "End"), models=("oracle",), model_descriptions={"oracle": "does everything"})
    assert "[Go to, Pick, End]" in text and "[oracle]" in text and "oracle does everything." in text
    assert "NoMaD" not in text


def test_first_instruction_matches_appendix_d():
    assert build_instruction("find an apple", [], "", "") == (
        "Task: find an apple\nInventory: None\nHistorical Execution: None\nFeedback: None\n"
        "Now based on the instruction above, please output Analysis, Subtask and Model in mentioned format.\n"
    )


def test_later_instruction_carries_history_feedback_inventory():
    history = history_entry(1, "Go to, fridge", "success") + history_entry(2, "Put, apple, fridge", "fail")
    text = build_instruction("t", ["apple"], history, "Unable to put, the fridge is closed, you should open it first")
    assert "Inventory: apple\n" in text
    assert "Historical Execution: (1) Go to, fridge(success) (2) Put, apple, fridge(fail) \n" in text
    assert "Feedback: Unable to put, the fridge is closed, you should open it first\n" in text


def test_inventory_format():
    assert format_inventory([]) == "None"
    assert format_inventory(["apple", "bowl"]) == "apple bowl"


def test_parse_strict_pattern():
    out = parse_output("Analysis: I see the fridge\nSubtask: [Go to, fridge]\nModel: NoMaD")
    assert out.parse_error is None
    assert out.subtask == Subtask("Go to", "fridge")
    assert out.model == "NoMaD" and out.analysis == "I see the fridge"


def test_parse_put_and_end():
    assert parse_output("Analysis: a\nSubtask: [Put, apple, brown_table]\nModel: RT-1-X").subtask == Subtask(
        "Put", "apple", "brown_table"
    )
    end = parse_output("Analysis: done\nSubtask: [End]\nModel: None")
    assert end.subtask is not None and end.subtask.is_end and end.model == "None"


def test_parse_relaxed_fallback_without_brackets():
    out = parse_output("Analysis: go there Subtask: Go to, sofa Model: PixNav")
    assert out.parse_error is None and out.subtask == Subtask("Go to", "sofa") and out.model == "PixNav"


def test_parse_failure_is_reported_not_raised():
    for text in ("", "hello", "Subtask: [Go to, x]", "Analysis: only analysis", None, 42):
        out = parse_output(text)  # type: ignore[arg-type]
        assert out.subtask is None and out.parse_error


def test_split_subtask_extra_commas_join_place():
    assert split_subtask("[Put, apple, table, near sofa]") == Subtask("Put", "apple", "table, near sofa")
    assert split_subtask(" ,, ") == Subtask("")


def test_format_output_round_trips():
    text = format_output("because", Subtask("Open", "fridge"), "octo")
    assert text == "Analysis: because\nSubtask: [Open, fridge]\nModel: octo"
    assert parse_output(text).subtask == Subtask("Open", "fridge")

"""EMMOE's word ``None`` (the success feedback, an empty inventory, the model of ``[End]``) is kept in the records
and prompts but never shown to a person as if it were a program's missing value (homiebot/report/shown.py):
``homie run``'s round table and the episode page say ``-`` or ``nothing`` instead."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from homiebot.data.record import read_episode
from homiebot.report import write_report

pytestmark = pytest.mark.slow  # the episode_record fixture runs an episode with images


def test_the_words_shown_for_emmoe_nothing() -> None:
    from homiebot.report.shown import shown_feedback, shown_inventory, shown_model

    assert shown_model("None") == shown_model(None) == shown_model("") == "-"
    assert shown_model("RT-1-X") == "RT-1-X"
    assert shown_feedback("None", "OK") == "-"
    assert shown_feedback("Unable to pick, the hand is full", "L1") == "Unable to pick, the hand is full"
    assert shown_inventory([]) == shown_inventory(["None"]) == "nothing"
    assert shown_inventory(["apple"]) == "apple"


def test_round_table_and_episode_page_show_no_none(episode_record: Path) -> None:
    from homiebot.cli.run import _round_table

    trajectory = read_episode(episode_record)
    assert trajectory.rounds[-1].output.model == "None" and trajectory.rounds[0].feedback.message == "None"
    printed = io.StringIO()
    Console(file=printed, width=200).print(_round_table(trajectory))
    table = printed.getvalue()
    assert "None" not in table
    end_row = [line for line in table.splitlines() if "[End]" in line][0]
    assert re.search(r"\[End\]\s+\S\s+-\s+\S\s+OK\s+\S\s+-\s+\S\s+nothing", end_row), end_row
    (page,) = write_report(episode_record)
    html = page.read_text()
    end = html.split('id="round8"', 1)[1]
    assert "model <b>-</b>" in end and "model <b>None</b>" not in html
    assert not re.search(r">OK</span> None", html)  # the success feedback is the badge alone
    assert "inventory None" not in html and "&rarr; None" not in html

"""While the play screen is up, log lines go to a file and only warnings reach the terminal
(homiebot/play/screen.py ``logs_to_file``); afterwards the terminal's logging is as it was."""

from __future__ import annotations

import io
import logging

from homiebot.play.screen import logs_to_file


def test_log_lines_go_to_the_file_while_the_screen_is_up(tmp_path):
    root = logging.getLogger()
    terminal = io.StringIO()
    handler = logging.StreamHandler(terminal)
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    log = logging.getLogger("homiebot.play.test")
    try:
        with logs_to_file(tmp_path / "play.log"):
            log.info("an info line during play")
            log.warning("a warning during play")
        log.info("an info line after play")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    shown = terminal.getvalue()
    assert "an info line during play" not in shown
    assert "a warning during play" in shown and "an info line after play" in shown
    kept = (tmp_path / "play.log").read_text()
    assert "INFO homiebot.play.test: an info line during play" in kept and "a warning during play" in kept
    assert "after play" not in kept
    assert handler.level == logging.NOTSET  # restored


def test_no_file_when_nothing_is_logged(tmp_path):
    with logs_to_file(tmp_path / "quiet.log"):
        pass
    assert not (tmp_path / "quiet.log").exists()

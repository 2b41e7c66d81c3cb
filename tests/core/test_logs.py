"""The command line's logging: HTTP clients' per-request INFO lines stay out of a command's output."""

from __future__ import annotations

import logging

import pytest

from homiebot.logs import CHATTY_LIBRARIES, configure_logging


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), {name: logging.getLogger(name).level for name in CHATTY_LIBRARIES})
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def test_http_clients_speak_only_at_warning_by_default():
    configure_logging(logging.INFO, "%(message)s")
    for name in CHATTY_LIBRARIES:
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
        assert logging.getLogger(name).isEnabledFor(logging.WARNING), name


def test_verbose_shows_their_requests():
    configure_logging(logging.DEBUG, "%(message)s")
    assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)

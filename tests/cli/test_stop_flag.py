"""The ROS commands' Ctrl-C flag: it catches SIGINT/SIGTERM while a command runs and then puts the caller's
handlers back (the commands also run in-process, from the Python API and CliRunner)."""

from __future__ import annotations

import signal

from homiebot.cli.ros import _StopFlag


def test_the_flag_sees_a_sigint_and_puts_the_callers_handlers_back() -> None:
    seen: list[int] = []

    def callers(num: int, _frame: object) -> None:
        seen.append(num)

    previous_int = signal.signal(signal.SIGINT, callers)
    try:
        term_before = signal.getsignal(signal.SIGTERM)
        with _StopFlag() as stop:
            assert not stop()
            signal.raise_signal(signal.SIGINT)
            assert stop() and stop.signal_name == "SIGINT"
        assert not seen  # the flag took it, not the caller's handler
        assert signal.getsignal(signal.SIGINT) is callers and signal.getsignal(signal.SIGTERM) is term_before
        assert stop()  # the flag keeps what it saw after the command
        signal.raise_signal(signal.SIGINT)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous_int)

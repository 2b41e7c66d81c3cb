"""``homie play`` driven through a pseudo terminal, as a person would use it: the command runs as a real
subprocess whose standard input, output and error are a pty (so rich sees a colour terminal and draws the
preview); the test reads the screen, waits for the prompt and types."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

HOMIE = str(Path(sys.executable).with_name("homie"))
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
PROMPT = "\n> "


class Terminal:
    """A command on a pseudo terminal: :meth:`expect` reads until a pattern shows, :meth:`type` sends a line."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "COLUMNS": "110", "LINES": "50",
               "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                        close_fds=True)
        os.close(slave)
        self.raw = b""
        self.seen = 0  # how much of the screen an expect() has consumed

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            return False
        if not chunk:
            return False
        self.raw += chunk
        return True

    def expect(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        compiled = re.compile(pattern)
        while True:
            match = compiled.search(self.screen, self.seen)
            if match is not None:
                self.seen = match.end()
                return match
            if time.monotonic() > deadline or not self._read(0.5):
                raise AssertionError(f"{pattern!r} did not show; the screen ends with:\n{self.screen[-3000:]}")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def wait(self, timeout: float = 120.0) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.1) and self.process.poll() is not None:
            if not select.select([self.master], [], [], 0)[0]:
                break
        code = self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(self.master)
        return code


@pytest.fixture()
def terminal(tmp_path):
    started: list[Terminal] = []

    def start(*args: str) -> Terminal:
        started.append(Terminal([HOMIE, "play", *args], tmp_path))
        return started[-1]

    yield start
    for t in started:
        if t.process.poll() is None:
            t.process.kill()
            t.process.wait()


def _number(term: Terminal, subtask: str) -> str:
    """The list number of ``subtask`` on the round's screen, after the round's prompt showed."""
    start = term.screen.rfind("Admissible subtasks:")
    match = re.search(r"(\d+) " + re.escape(subtask), term.screen[start:])
    assert match is not None, f"{subtask} is not listed:\n{term.screen[start:]}"
    return match.group(1)


@pytest.mark.slow
def test_a_person_completes_a_task_in_the_terminal(terminal, tmp_path):
    out = tmp_path / "played"
    term = terminal("--task", "demo-drawer", "--as", "robot", "--out", str(out), "--no-video", "--no-report",
                    "--views", str(tmp_path / "views"))
    term.expect(r"Round 1 of 20")
    term.expect(r"Views \(front, left / back, right\): .*round01_views\.png")
    term.expect(PROMPT)
    assert "\u2580" in term.screen  # the colour terminal got the preview
    term.type("go to the drawer")  # not EMMOE's format: one line, then the prompt again
    term.expect(r"not a subtask: 'go to the drawer'; write \[Action, target\].*\n> ")
    term.type(f"{_number(term, '[Go to, kitchen_drawer]')}")
    term.expect(r"\(1\) \[Go to, kitchen_drawer\] -> OK")
    term.expect(PROMPT)
    term.type(_number(term, "[Open, kitchen_drawer]"))
    term.expect(r"\(2\) \[Open, kitchen_drawer\] -> OK")
    for index, line in enumerate(["[Go to, short_can]", "[Pick, short can]", "[Go to, kitchen_drawer]"], start=3):
        term.expect(PROMPT)
        term.type(line)
        term.expect(rf"\({index}\) \[")
    term.expect(PROMPT)
    term.type(_number(term, "[Put, short_can, kitchen_drawer]"))
    term.expect(r"\(6\) \[Put, short_can, kitchen_drawer\] -> OK")
    term.expect(PROMPT)
    term.type("[End]")
    term.expect(r"success \(EMMOE keypaths: TP 100%\): 7 rounds")  # the record's verdict (docs/evaluation.md)
    term.expect(r"log: \S+played\.log")
    assert term.wait() == 0
    # Log lines went to the file beside the record while the screen was up, none onto the screen.
    assert " INFO " not in term.screen and f"Log lines go to {out}.log while you play" in term.screen
    assert "INFO homiebot.data.record: episode record written to" in Path(f"{out}.log").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success"] is True and summary["planner"] == "keyboard"
    play = json.loads((out / "play.json").read_text())
    assert play["ended_by"] == "end" and play["typed"][0]["outcome"].startswith("refused: not a subtask")
    assert sorted(p.name for p in (tmp_path / "views").iterdir()) == [f"round{i:02d}_views.png" for i in range(1, 8)]


@pytest.mark.slow
def test_quit_in_the_terminal_is_a_clean_stop(terminal, tmp_path):
    out = tmp_path / "quit"
    term = terminal("--task", "demo-drawer", "--as", "robot", "--out", str(out), "--no-video", "--no-report",
                    "--no-preview")
    views = Path(term.expect(r"\): (\S+round01_views\.png)").group(1))
    term.expect(PROMPT)
    assert "\u2580" not in term.screen and views.is_file()
    term.type("99")
    term.expect(r"no subtask number 99; choose 1-\d+\n> ")
    term.type("help")
    term.expect(r"quit +stop here; the episode is recorded as ended by you")
    term.expect(PROMPT)
    term.type("quit")
    term.expect(r"you quit in round 1 \(recorded as ended by the user\); failure \(EMMOE keypaths: TP 0%, SR needs "
                r"100%\): 0 rounds")
    assert term.wait() == 0
    assert "error" not in term.screen.lower() and "Traceback" not in term.screen
    assert json.loads((out / "play.json").read_text())["ended_by"] == "user"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error"] is None and summary["success"] is False
    assert not views.parent.exists()  # the temporary views folder is gone; the record keeps the views


@pytest.mark.slow
def test_ctrl_d_stops_like_quit(terminal, tmp_path):
    term = terminal("--task", "demo-drawer", "--as", "robot", "--out", str(tmp_path / "eof"), "--no-video", "--no-report",
                    "--no-preview")
    term.expect(PROMPT)
    os.write(term.master, b"\x04")  # Ctrl-D on an empty line: the end of the input
    term.expect(r"you quit in round 1")
    assert term.wait() == 0
    assert json.loads((tmp_path / "eof" / "play.json").read_text())["quit_reason"] == "end of input"


@pytest.mark.slow
def test_by_default_the_person_is_the_human_beside_the_expert_robot(terminal, tmp_path):
    out = tmp_path / "human"
    term = terminal("--task", "partnr-1-022", "--out", str(out), "--no-video", "--no-report", "--no-preview")
    term.expect(r"You play the human in partnr-1-022")
    term.expect(r"robot: \(1\) \[Go to, mug\] -> OK")
    term.expect(r"The robot's last round: \(1\) \[Go to, mug\] -> OK")
    term.expect(PROMPT)
    term.type("[Go to, microwave]")
    term.expect(r"you: \(1\) \[Go to, microwave\] -> OK")
    term.expect(PROMPT)
    term.type(_number(term, "[Turn on, microwave]"))
    term.expect(r"you: \(2\) \[Turn on, microwave\] -> OK")
    term.expect(PROMPT)
    term.type(_number(term, "[Wait]"))
    term.expect(r"robot: \(4\) \[Put, mug, chair\] -> OK")
    term.expect(PROMPT)
    term.type("[End]")
    term.expect(r"robot: \(5\) \[End\] -> OK")
    term.expect(r"success \(the task's PARTNR evaluation function: PC 1\.00\): 5 robot rounds and 4 of yours")
    assert term.wait() == 0
    play = json.loads((out / "play.json").read_text())
    assert play["role"] == "human" and play["ended_by"] == "end"
    assert [r["subtask"] for r in play["partner_rounds"]] == ["[Go to, microwave]", "[Turn on, microwave]", "[Wait]",
                                                              "[End]"]

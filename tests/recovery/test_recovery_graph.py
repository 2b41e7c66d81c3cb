"""``homie up sim --recovery``: the planner node wraps its planner with the core's recovery wrapper, and a failure in
the graph (separate processes over real DDS) goes through the stages as it does in-process.

The base planner is the real OpenAI-compatible planner and the stages ask the same server, a
:class:`FakeChatServer` that answers from a script (no model: the test is about the wiring, the model's quality is
measured in docs/results/recovery-ablation.md). The script: go to the fridge, open it, go to the table, then put the
can into the fridge with an empty hand (L2). Stage 1 calls the step important, stage 2 inserts the missing
precondition (pick the can, go back to the fridge), the retried put succeeds, and the base planner ends."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from recovery_helpers import FakeChatServer, answer

pytestmark = [pytest.mark.ros, pytest.mark.slow]

HOMIE = str(Path(sys.executable).with_name("homie"))
TASK = "demo-green-can"
BASE = [answer("[Go to, fridge]", "NoMaD"), answer("[Open, fridge]", "octo"), answer("[Go to, brown_table]", "NoMaD"),
        answer("[Put, green_can, fridge]")]
STAGES = {
    "importance": json.dumps({"reason": "the can has to go into the fridge", "important": True}),
    "preconditions": json.dumps({"reason": "the hand is empty: pick the can first", "missing": True,
                                 "steps": ["[Pick, green_can]", "[Go to, fridge]"]}),
}
RECOVERY = ["--recovery", "cmfr", "--recovery-stages", "1,2", "--no-recovery-search"]


def _environment() -> dict[str, str]:
    from homiebot.ros.environment import overlay_environment

    env = overlay_environment()
    # A domain of its own, discovery on this machine only: parallel runs must not see each other's nodes.
    domain = random.Random(os.getpid() ^ 0x19).randrange(100, 221)
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"), COLUMNS="200")
    return env


def _episode(command: list[str], tmp: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    server = FakeChatServer(list(BASE), STAGES)
    try:
        done = subprocess.run([HOMIE, *command, "--planner", "openai", "--base-url", server.url, "--model", "fake",
                               *RECOVERY], capture_output=True, text=True, env=env, cwd=tmp, timeout=420)
    finally:
        server.close()
    return done, server.requests


def test_a_failure_in_the_graph_goes_through_the_stages_as_in_process(tmp_path) -> None:
    env = _environment()
    up, up_calls = _episode(["up", "sim", "--task", TASK, "--out", str(tmp_path / "up"),
                             "--domain-id", env["ROS_DOMAIN_ID"]], tmp_path, env)
    assert up.returncode == 0, up.stderr[-3000:]
    run, run_calls = _episode(["run", "--task", TASK, "--no-render", "--no-video", "--no-report",
                               "--out", str(tmp_path / "run")], tmp_path, env)
    assert run.returncode == 0, run.stderr[-3000:]

    # Four base rounds, then the failure's two stages inside one planner call, then the base planner again.
    assert up_calls == ["base"] * 4 + ["importance", "preconditions", "base"] == run_calls
    rounds = [json.loads(line) for line in (tmp_path / "up" / "record" / "rounds.jsonl").read_text().splitlines()]
    steps = [(r["subtask_text"], r["error_code"]) for r in rounds]
    assert steps == [("[Go to, fridge]", "OK"), ("[Open, fridge]", "OK"), ("[Go to, brown_table]", "OK"),
                     ("[Put, green_can, fridge]", "L2"), ("[Pick, green_can]", "OK"), ("[Go to, fridge]", "OK"),
                     ("[Put, green_can, fridge]", "OK"), ("[End]", "OK")]
    in_process = [json.loads(line) for line in (tmp_path / "run" / "rounds.jsonl").read_text().splitlines()]
    assert steps == [(r["subtask_text"], r["error_code"]) for r in in_process]
    assert json.loads((tmp_path / "up" / "result.json").read_text())["goal_satisfied"] is True

    stats = json.loads((tmp_path / "up" / "record" / "recovery.json").read_text())
    assert stats == json.loads((tmp_path / "run" / "recovery.json").read_text()) | {"llm_seconds": stats["llm_seconds"]}
    assert stats["mode"] == "cmfr" and stats["stages"] == [1, 2] and stats["search"] is False
    assert stats["failed_subtasks"] == 1 and stats["failures_by_code"] == {"L2": 1}
    assert stats["reached"] == {"1": 1, "2": 1, "3": 0, "4": 0} and stats["unimportant"] == 0
    assert stats["stage2_retried"] == 1 and stats["stage2_success"] == 1 and stats["recovery_subtasks"] == 3
    assert stats["llm_calls"] == 2
    assert "recovery statistics:" in up.stderr + up.stdout

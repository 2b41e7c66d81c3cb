"""Recorded episodes stay what they were: the episodes the build path makes (a recorded single-agent expert
episode, the collaboration evaluation's scored pair episodes, a ``homie play`` episode with the person as PARTNR's
human) are compared with a golden copy recorded before the two-agent build moved into the one build path.

The golden copy (``data/build_path_golden.json``) holds, per episode, every round of both agents (subtask, feedback
code and message, inventory, tries) and a digest of every recorded world state (``states.jsonl`` of a record, the
world after a scored pair episode), floats rounded to 1e-4. A change in what an episode does
(another subtask, another feedback, an object a millimetre off in any state) fails here and names the episode and
the first round or state that differs. ``HOMIE_WRITE_GOLDEN=1`` rewrites the file (only when a change of behaviour
is meant, and said so in its commit).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from homiebot.sim.base import make_simulator

GOLDEN = Path(__file__).with_name("data") / "build_path_golden.json"
#: Keys of a record's files that measure this machine, not the episode.
_CLOCK_KEYS = ("wall", "timings", "elapsed", "duration_s", "created", "latency")


def _normal(value: Any) -> Any:
    """``value`` with floats rounded and this machine's clocks left out."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in sorted(value.items()) if not any(c in k for c in _CLOCK_KEYS)}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_normal(value), sort_keys=True).encode()).hexdigest()[:16]


def _rounds(records: Any) -> list[list[Any]]:
    return [[r.agent, r.subtask_text, r.feedback.code.value, r.feedback.message, list(r.feedback.inventory),
             r.feedback.attempts] for r in records]


def _record(record: Path) -> dict[str, Any]:
    """What a record keeps of its episode: its rounds and the digest of every state line."""
    rounds = [json.loads(line) for line in (record / "rounds.jsonl").read_text().splitlines()]
    states = [json.loads(line) for line in (record / "states.jsonl").read_text().splitlines()]
    summary = json.loads((record / "summary.json").read_text())
    return {
        "rounds": [[r.get("subtask"), r.get("feedback", {}).get("code") if isinstance(r.get("feedback"), dict)
                    else r.get("code"), _digest(r)] for r in rounds],
        "states": [_digest(s) for s in states],
        "success": summary.get("success"),
        "ended": summary.get("ended"),
    }


def _single_expert(tmp_path: Path) -> dict[str, Any]:
    """emmoe-084 with EMMOE's execution noise, recorded through the build path (as ``homie run`` records it)."""
    from homiebot.agent.build import build_episode
    from homiebot.cli.run import states_judge
    from homiebot.config.run import run_config

    config = run_config({"task": "emmoe-084", "seed": 1, "skills": {"noise": "emmoe"},
                         "simulator": {"render": False}, "recording": {"video": False, "report": False}})
    episode = build_episode(config, out=tmp_path / "single", judge=states_judge)
    try:
        trajectory = episode.run()
    finally:
        episode.close()
    return {"trajectory": _rounds(trajectory.rounds), **_record(tmp_path / "single")}


def _pair(mode: str, noise: str) -> Callable[[Path], dict[str, Any]]:
    """A scored robot-and-human episode of the collaboration evaluation (``homie eval --agents robot+human``)."""

    def run(tmp_path: Path) -> dict[str, Any]:
        from homiebot.config.collaboration import CollaborationConfig
        from homiebot.multiagent.evaluate import run_pair
        from homiebot.multiagent.pair import pair_planners

        settings = CollaborationConfig(suite="partnr", mode=mode, noise=noise)
        robot, human = pair_planners(settings)
        sim = make_simulator("mujoco", render=False, human=True)
        try:
            line, trajectory = run_pair(sim, _task("partnr-6-007"), 0, robot, human, settings)
            final = _digest(dataclasses.asdict(sim.state()))
        finally:
            sim.shutdown()
            for planner in {id(robot): robot, id(human): human}.values():
                planner.close()
        line.pop("wall_s")
        return {"line": _normal(line), "robot": _rounds(trajectory.rounds), "human": _rounds(trajectory.partner_rounds),
                "final_state": final}

    return run


def _played(tmp_path: Path) -> dict[str, Any]:
    """``homie play --as human`` on partnr-1-022: the expert drives the robot, typed lines play the human."""
    from rich.console import Console

    from homiebot.agent.build import build_simulator
    from homiebot.data.record import EpisodeRecorder
    from homiebot.eval.partnr.recording import StatesFileRecorder, simulator_clock
    from homiebot.play.episode import play_config, play_episode, robot_planner
    from homiebot.play.keyboard import KeyboardPlanner
    from homiebot.play.screen import PlayScreen

    task = _task("partnr-1-022")
    lines = ["[Go to, microwave]", "[Turn on, microwave]", "[Wait]", "[End]"]
    robot, setting = robot_planner("expert", task)
    config = play_config(task, role="human", robot=setting, max_rounds=10, video=False)
    screen = PlayScreen(Console(file=io.StringIO(), width=100), None, preview=False, role="human", task_id=task.id)
    person = KeyboardPlanner(io.StringIO("".join(f"{line}\n" for line in lines)), screen)
    sim = build_simulator(config.simulator)
    try:
        recorder = EpisodeRecorder(tmp_path / "played", video=False)
        states = StatesFileRecorder(recorder, task=task, clock=simulator_clock(sim))
        outcome = play_episode(config, person, recorder, robot=robot, simulator=sim, observers=[states, screen])
    finally:
        sim.shutdown()
        robot.close()
    trajectory = outcome.trajectory
    return {"robot": _rounds(trajectory.rounds), "human": _rounds(trajectory.partner_rounds),
            "ended_by": outcome.ended_by, **_record(outcome.record)}


def _task(task_id: str) -> Any:
    from homiebot.tasks.suite import get_task

    return get_task(task_id)


EPISODES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "single-expert-emmoe-084-noise": _single_expert,
    "pair-decentralized-partnr-6-007-noise": _pair("decentralized", "emmoe"),
    "pair-centralized-partnr-6-007": _pair("centralized", "off"),
    "play-human-partnr-1-022": _played,
}


def _first_difference(path: str, got: Any, want: Any) -> str | None:
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            found = _first_difference(f"{path}.{key}", got.get(key), want.get(key))
            if found:
                return found
        return None
    if isinstance(got, list) and isinstance(want, list):
        for index, (a, b) in enumerate(zip(got, want, strict=False)):
            found = _first_difference(f"{path}[{index}]", a, b)
            if found:
                return found
        return None if len(got) == len(want) else f"{path}: {len(got)} items, golden {len(want)}"
    return None if got == want else f"{path}: {got!r}, golden {want!r}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EPISODES))
def test_the_episode_is_the_golden_one(name: str, tmp_path: Path) -> None:
    got = _normal(EPISODES[name](tmp_path))
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    if os.environ.get("HOMIE_WRITE_GOLDEN") == "1":
        golden[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
        return
    assert name in golden, f"no golden copy of {name} (HOMIE_WRITE_GOLDEN=1 writes it)"
    assert got["robot" if "robot" in got else "trajectory"], "the episode has no rounds"
    difference = _first_difference(name, got, golden[name])
    assert difference is None, difference

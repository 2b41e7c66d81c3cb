"""The searching text expert: it acts only on objects an observation has named, searches the receptacles in the
room sentence's order until then, and still solves the MuEP-style tasks (homiebot.eval.muep_suite)."""

from __future__ import annotations

import json
import re

import pytest

from homiebot.eval.muep_run import check_run
from homiebot.eval.muep_suite import (
    AlfredTask,
    SearchingTextExpert,
    TextExpert,
    load_suite,
    run_text_episode,
)
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.alfred import TASK_TYPES
from homiebot.textworld.world import TextWorld

_NAME = re.compile(r"\b([a-z]+ [0-9]+)\b")


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def sample() -> list[AlfredTask]:
    """One task of each type on each split."""
    suite = load_suite()
    return [next(t for t in suite if t.task_type == kind and t.split == split)
            for kind in TASK_TYPES for split in ("seen", "unseen")]


def _room(sim, task: AlfredTask) -> tuple[list[str], set[str]]:
    """The receptacles in the room sentence's order and the ALFWorld names of the objects, at the task's start."""
    sim.reset(task.scene, seed=task.seed)
    world = TextWorld(sim)
    world.reset(task.instruction)
    names = world.names
    return ([names.text(r) for r in names.receptacles if world.can_hold(r)],
            {names.text(o) for o in names.objects})


def test_it_solves_every_type_and_takes_only_what_it_has_seen(sim, sample) -> None:
    longer = 0
    for task in sample:
        _, objects = _room(sim, task)
        played = run_text_episode(sim, task, SearchingTextExpert())
        assert played.episode.success, (task.id, played.transcript)
        named = {n for n in _NAME.findall(played.intro) if n in objects}
        assert not named, f"{task.id}: the intro names objects {named}"
        for command, observation in played.transcript:
            take = re.match(r"^take (.+) from (.+)$", command)
            if take is not None:
                assert take.group(1) in named, f"{task.id}: took {take.group(1)} before any observation named it"
            named |= {n for n in _NAME.findall(observation) if n in objects}
        privileged = run_text_episode(sim, task, TextExpert())
        assert len(played.transcript) >= len(privileged.transcript)
        longer += len(played.transcript) > len(privileged.transcript)
    assert longer >= len(sample) // 2, "searching should cost steps on most tasks"


def test_until_the_object_is_seen_it_goes_through_the_room_sentence_in_order(sim, sample) -> None:
    for task in sample:
        holders, objects = _room(sim, task)
        played = run_text_episode(sim, task, SearchingTextExpert())
        visits = []
        for command, _ in played.transcript:
            if not command.startswith(("go to ", "open ")):
                break  # the first take, treatment or use ends the first search
            if command.startswith("go to "):
                visits.append(command.removeprefix("go to "))
            else:
                assert command.removeprefix("open ") == visits[-1], "it opens only where it stands"
        # A closed receptacle the task names is opened first (the simulator opens with an empty hand only), and so
        # searched on the way; every other visit follows the room sentence.
        named_target = [n for n in holders if n.rsplit(" ", 1)[0] == task.receptacle_type]
        searched = [v for v in visits if v not in named_target]
        order = [h for h in holders if h not in named_target]
        assert searched == order[: len(searched)], (task.id, visits, holders)


def test_the_alfworld_engine_refuses_it() -> None:
    with pytest.raises(ValueError, match="searching-expert agent plays the simulator's text world only"):
        check_run("searching-expert", "alfworld")
    check_run("searching-expert", "sim")


def test_the_collection_records_it_by_name(tmp_path, sim) -> None:
    from typer.testing import CliRunner

    from homiebot.cli import build_app
    from homiebot.eval.muep_collect import DEFAULT_SEED_OFFSET, training_tasks

    runner = CliRunner()
    out = tmp_path / "searching"
    task = next(t.id for t in training_tasks(sim, DEFAULT_SEED_OFFSET) if t.split == "validation")
    result = runner.invoke(build_app(), ["data", "collect", "--suite", "muep", "--planner", "searching-expert",
                                         "--split", "validation", "--tasks", task, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "collect.json").read_text())["planner"] == "searching-expert"
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    assert record["success"], record["transcript"]
    # The same folder with the other expert is another collection: refused before anything is played.
    again = runner.invoke(build_app(), ["data", "collect", "--suite", "muep", "--planner", "expert",
                                        "--split", "validation", "--tasks", task, "--out", str(out)])
    assert again.exit_code == 2 and "other settings" in again.output, again.output

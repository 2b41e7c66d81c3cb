"""Our scenes exported as ALFWorld game folders and played through the real ALFWorld engine (alfworld 0.4.2 +
textworld 1.7.0, the 'textworld' extra), offline, on folders this test generates."""

from __future__ import annotations

import json

import pytest

from homiebot.eval.muep_run import load_records, play_alfworld, recompute, run_suite
from homiebot.eval.muep_suite import load_suite
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.tasks.alfred import TASK_TYPES
from homiebot.textworld import TextWorld
from homiebot.textworld import alfworld as engine

pytestmark = pytest.mark.skipif(
    not engine.available(), reason="the ALFWorld engine needs the 'textworld' extra (pip install -e '.[textworld]')"
)


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def first_of_each_type(suite):
    return [next(t for t in suite if t.task_type == task_type and t.split == "unseen") for task_type in TASK_TYPES]


def test_an_exported_folder_is_what_alfworld_collects(sim, suite, tmp_path) -> None:
    task = first_of_each_type(suite)[0]
    sim.reset(task.scene, seed=task.seed)
    game = engine.export_game(sim, task.task_type, task.object_type, task.receptacle_type, task.toggle_type, task.instruction, tmp_path / "unseen" / task.id)
    assert {p.name for p in game.folder.iterdir()} == {"initial_state.pddl", "traj_data.json", "game.tw-pddl"}
    data = json.loads(game.game_file.read_text())
    assert data["solvable"] is True and f"Your task is to: {task.instruction}." in data["grammar"]
    assert json.loads((game.folder / "traj_data.json").read_text())["task_type"] == task.task_type
    assert list(engine.find_games(tmp_path)) == [("unseen", game.game_file)]
    assert list(engine.find_games(tmp_path, split="seen")) == []
    with pytest.raises(FileNotFoundError, match="ALFWorld data directory not found"):
        list(engine.find_games(tmp_path / "missing"))


def test_alfworld_shows_the_same_room_as_our_text_world(sim, suite, tmp_path) -> None:
    task = first_of_each_type(suite)[0]
    sim.reset(task.scene, seed=task.seed)
    ours = TextWorld(sim).reset(task.instruction)
    game_file = engine.export_game(sim, task.task_type, task.object_type, task.receptacle_type, task.toggle_type, task.instruction, tmp_path / "g").game_file
    game = engine.AlfworldGame(game_file)
    try:
        theirs = game.reset().observation
    finally:
        game.close()
    # The banner, the task line, and the receptacles (ALFWorld's lamp is an object on a floor of its own).
    assert theirs.split("\n\n")[2] == ours.split("\n\n")[2]
    assert theirs.split("\n\n")[1] == ours.split("\n\n")[1].replace("floorlamp 1", "floor 1")


@pytest.mark.slow
def test_the_planner_expert_wins_one_task_of_each_type_and_random_is_scored(sim, suite, tmp_path) -> None:
    for task in first_of_each_type(suite):
        episode, transcript = play_alfworld(sim, task, "expert", tmp_path / task.id)
        assert episode.success and episode.goal_conditions_met == episode.goal_conditions_total, (task.id, transcript)
        assert episode.compliant and 0 < episode.steps <= 30
    episode, _ = play_alfworld(sim, first_of_each_type(suite)[2], "random", tmp_path / "random")
    assert episode.steps <= 30 and 0 <= episode.goal_conditions_met <= 3


def test_the_papers_phrasing_plays_put_in_on(sim, suite, tmp_path) -> None:
    task = first_of_each_type(suite)[0]
    episode, transcript = play_alfworld(sim, task, "expert", tmp_path / "papers", phrasing="papers")
    assert episode.success
    assert any(command.startswith("put ") and " in/on " in command for command, _ in transcript)
    assert transcript[-1][1].startswith("You put the ")


def test_run_suite_writes_records_the_table_is_recomputed_from(sim, suite, tmp_path) -> None:
    tasks = first_of_each_type(suite)[:2]
    run_suite(tasks, "expert", "alfworld", tmp_path, sim=sim)
    assert len(load_records(tmp_path)) == 2
    table = recompute(tmp_path)
    assert "| unseen | Overall | 2 | 100.00 |" in table
    assert (tmp_path / "report.md").read_text().startswith("### expert on the alfworld engine")

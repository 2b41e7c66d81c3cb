"""The text planner on the MuEP-style suite (homiebot.eval.muep_chat): the chat it plans in is, turn for turn, the
chat its training rows hold; the constrained answer is one admissible command."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from homiebot.eval.muep_chat import ChatTextAgent
from homiebot.eval.muep_run import check_run
from homiebot.eval.muep_suite import TextExpert, load_suite, run_text_episode
from homiebot.planner.hf_backend import Generation
from homiebot.sim.mujoco.backend import MujocoSimulator
from homiebot.textworld.chat import command_grammar, episode_messages, first_line


@dataclass
class ScriptedEngine:
    """Stands in for a text model's engine: answers from a script, keeps the conversations and grammars."""

    answers: list[str]
    seen: list[list] = field(default_factory=list)
    grammars: list[str | None] = field(default_factory=list)
    text_only: bool = True

    def generate(self, conversations, *, grammars=None, max_new_tokens: int = 512, **_):
        self.seen.append(list(conversations[0]))
        self.grammars.append(grammars[0] if grammars is not None else None)
        return [Generation(text=self.answers.pop(0), prompt_tokens=1, completion_tokens=1, finish_reason="stop")]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def sim():
    simulator = MujocoSimulator(render=False)
    yield simulator
    simulator.shutdown()


def test_the_planning_chat_is_the_training_chat(sim) -> None:
    task = next(t for t in load_suite() if t.task_type == "pick_cool_then_place_in_recep")
    expert = run_text_episode(sim, task, TextExpert())
    assert expert.episode.success
    commands = [c for c, _ in expert.transcript]
    engine = ScriptedEngine(list(commands))
    played = run_text_episode(sim, task, ChatTextAgent(engine, constrained=True))
    assert played.episode.success and played.transcript == expert.transcript
    training = episode_messages(expert.intro, expert.transcript)
    assert training[0]["content"].startswith("-= Welcome to TextWorld") and training[0]["role"] == "user"
    assert [m["role"] for m in training[:3]] == ["user", "assistant", "user"]
    for turn, conversation in enumerate(engine.seen):
        sent = [{"role": m.role, "content": m.text} for m in conversation]
        upto = [i for i, m in enumerate(training) if m["role"] == "assistant"][turn]
        assert sent == training[:upto]  # what the model reads before its answer = the training row's context
    for command, grammar in zip(commands, engine.grammars, strict=True):
        assert grammar is not None and json.dumps(command) in grammar and '"help"' not in grammar


def test_unconstrained_answers_play_their_first_line(sim) -> None:
    task = next(t for t in load_suite() if t.task_type == "pick_and_place_simple")
    engine = ScriptedEngine(["Go to countertop 1.\nmore", "dance", "dance"])
    played = run_text_episode(sim, task, ChatTextAgent(engine, constrained=False))
    assert engine.grammars == [None, None, None]  # the third answer repeats the second: MuEP stops before it
    assert [c for c, _ in played.transcript] == ["go to countertop 1", "dance"]
    assert played.episode.stopped_on_repeat and played.episode.valid == (True, False)


def test_command_grammar_quotes_and_refuses_an_empty_choice() -> None:
    grammar = command_grammar(["go to sofa 1", "help", 'say "hi"', "go to sofa 1"])
    assert grammar == 'root ::= "go to sofa 1" | "say \\"hi\\""'
    with pytest.raises(ValueError, match="no admissible"):
        command_grammar(["help"])
    assert first_line("  'Take apple 1 from table 1.'\nx") == "take apple 1 from table 1"


def test_hf_plays_text_in_the_simulator_only() -> None:
    check_run("hf", "sim", "text")
    with pytest.raises(ValueError, match="text world only"):
        check_run("hf", "alfworld", "text")
    with pytest.raises(ValueError, match="text observation only"):
        check_run("hf", "sim", "both")
    with pytest.raises(ValueError, match="needs --model"):
        ChatTextAgent.from_options({"constrained": True})


def test_the_command_line_refuses_model_options_off_hf_and_emmoe_options_in_the_collection(tmp_path) -> None:
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    runner = CliRunner()
    app = build_app()
    refused = runner.invoke(app, ["eval", "--suite", "muep", "--planner", "random", "--model", "smollm2",
                                  "--out", str(tmp_path / "a")])
    assert refused.exit_code == 2 and "--model: options of --planner hf" in refused.output
    assert not (tmp_path / "a").exists()
    for args, message in [([], "needs --model"), (["--model", str(tmp_path / "none")], "none")]:
        nothing = runner.invoke(app, ["eval", "--suite", "muep", "--planner", "hf", *args, "--out", str(tmp_path / "h")])
        assert nothing.exit_code == 2 and message in nothing.output and not (tmp_path / "h").exists(), nothing.output
    # The suite's default planner (expert) is taken; refused further on, for the seed asked (0: the demonstration
    # tasks'). Without --seed-offset the first free offset is taken instead (test_collect_planner_default).
    collect = runner.invoke(app, ["data", "collect", "--suite", "muep", "--seed-offset", "0",
                                  "--out", str(tmp_path / "b")])
    assert collect.exit_code == 2 and "--planner" not in collect.output and "evaluation plays" in collect.output
    assert not (tmp_path / "b").exists()
    refused = runner.invoke(app, ["data", "collect", "--suite", "muep", "--planner", "perturbed-expert",
                                  "--seed-offset", "10000", "--out", str(tmp_path / "b")])
    assert refused.exit_code == 2 and "--planner perturbed-expert" in refused.output and not (tmp_path / "b").exists()
    seeds = runner.invoke(app, ["data", "collect", "--suite", "muep", "--planner", "expert", "--seed-offset", "5",
                                "--out", str(tmp_path / "c")])
    assert seeds.exit_code == 2 and "muep evaluation plays" in seeds.output and not (tmp_path / "c").exists()

"""The keyboard planner reads its answers from a text stream: refusals re-prompt, commands show and do not
answer, quit and the end of the input stop the episode, and every typed line is kept."""

from __future__ import annotations

import io

import pytest

from homiebot.planner.base import PlanRequest
from homiebot.play.keyboard import Choice, KeyboardPlanner, PlayerQuit
from homiebot.sim.base import make_simulator
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS


class RecordingScreen:
    """Keeps what the planner showed, in order (a test double of homiebot.play.screen.PlayScreen)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def show_request(self, request: PlanRequest, menu) -> None:
        self.events.append(("request", [c.subtask.text() for c in menu]))

    def show_help(self, request: PlanRequest) -> None:
        self.events.append(("help", None))

    def show_menu(self, menu) -> None:
        self.events.append(("menu", len(menu)))

    def show_world(self, request: PlanRequest) -> None:
        self.events.append(("world", None))

    def refuse(self, message: str) -> None:
        self.events.append(("refuse", message))

    def prompt(self) -> None:
        self.events.append(("prompt", None))


@pytest.fixture(scope="module")
def state():
    sim = make_simulator("mujoco", render=False)
    sim.reset("apartment_1", seed=0)
    yield sim.state()
    sim.shutdown()


def _request(state, round_index=1) -> PlanRequest:
    return PlanRequest(system_prompt="", instruction="", images=[], task="put the mug away", round_index=round_index,
                       actions=EMMOE_ACTIONS, models=EMMOE_MODELS, world_state=state)


def test_refusals_and_commands_re_prompt_until_a_subtask(state):
    screen = RecordingScreen()
    planner = KeyboardPlanner(io.StringIO("\nhelp\nlist\nlook\n[Go to, moon]\n[Go to, fridge]\n"), screen)
    planner.reset("t")
    answer = planner.plan(_request(state))
    assert answer.splitlines()[1:] == ["Subtask: [Go to, fridge]", "Model: NoMaD"]
    kinds = [kind for kind, _ in screen.events]
    assert kinds == ["request", "prompt", "refuse", "prompt", "help", "prompt", "menu", "prompt", "world", "prompt",
                     "refuse", "prompt"]
    refusals = [value for kind, value in screen.events if kind == "refuse"]
    assert refusals[1].startswith("there is no target 'moon' in this house")
    assert [(t.text, t.outcome.split(":")[0]) for t in planner.typed] == [
        ("", "refused"), ("help", "help"), ("list", "list"), ("look", "look"), ("[Go to, moon]", "refused"),
        ("[Go to, fridge]", "subtask")]


def test_a_number_answers_with_the_listed_subtask(state):
    screen = RecordingScreen()
    planner = KeyboardPlanner(io.StringIO("1\n"), screen)
    answer = planner.plan(_request(state))
    first = screen.events[0][1][0]  # type: ignore[index]
    assert f"Subtask: {first}" in answer


@pytest.mark.parametrize(("lines", "reason"), [("quit\n", "typed quit"), ("", "end of input"),
                                               ("[Go to, fridge]\n", "end of input")])
def test_quit_and_end_of_input_raise_player_quit(state, lines, reason):
    planner = KeyboardPlanner(io.StringIO(lines))
    planner.reset("t")
    if lines.startswith("[Go to"):
        planner.plan(_request(state, 1))
    with pytest.raises(PlayerQuit) as caught:
        planner.plan(_request(state, 2))
    assert caught.value.round_index == 2 and caught.value.reason == reason
    assert planner.quit_event is caught.value


def test_reset_forgets_the_last_episode(state):
    planner = KeyboardPlanner(io.StringIO("quit\n[End]\n"))
    with pytest.raises(PlayerQuit):
        planner.plan(_request(state))
    planner.reset("t")
    assert planner.quit_event is None and planner.typed == []
    assert "Subtask: [End]" in planner.plan(_request(state))


def test_choice_answer_is_emmoe_text():
    from homiebot.types import Subtask

    text = Choice(Subtask("Put", "mug", "sink"), "RT-1-X").answer()
    assert text.startswith("Analysis: ") and text.endswith("Subtask: [Put, mug, sink]\nModel: RT-1-X")

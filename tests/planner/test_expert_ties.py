"""The expert's equally good subtasks (ExpertPlanner.equally_good): the candidates it holds equal, each named first
in turn, without changing the episode it plans."""

from __future__ import annotations

import pytest

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.perturbed import PerturbedExpertPlanner, PromptBoundExpertPlanner
from homiebot.planner.prompt import parse_output
from homiebot.sim.base import make_simulator
from homiebot.tasks.goals import GoalSpec
from homiebot.tasks.suite import TaskSpec
from homiebot.types import Subtask

NO_RENDER = EpisodeConfig(render=False)
# apartment_1 holds more than one can outside closed furniture, none within reach at the start.
TWO_CANS = [{"type": "placed", "category": "can", "relation": "on", "receptacle": "sofa", "count": 2}]


@pytest.fixture(scope="module")
def sim():
    simulator = make_simulator("mujoco", render=False)
    yield simulator
    simulator.shutdown()


def task(goal: list[dict]) -> TaskSpec:
    return TaskSpec(id="x", instruction="put two cans on the sofa", scene="apartment_1", attributes=["long-horizon"],
                    keypaths=[["[End]"]], goal=GoalSpec.model_validate({"all": goal}))


class AskFirst(Planner):
    """Asks ``inner`` for its equally good subtasks, then plans with it; keeps both per round."""

    def __init__(self, inner: ExpertPlanner) -> None:
        self.inner, self.name, self.privileged, self.accepts_free_text = inner, inner.name, True, False
        self.ties: list[list[Subtask]] = []
        self.answers: list[Subtask | None] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self.inner.reset(task, seed)
        self.ties, self.answers = [], []

    def plan(self, request: PlanRequest) -> str:
        self.ties.append(self.inner.equally_good(request))
        answer = self.inner.plan(request)
        self.answers.append(parse_output(answer).subtask)
        return answer


def test_the_prompt_bound_expert_holds_both_cans_equal_and_keeps_its_move(sim):
    asked = AskFirst(PromptBoundExpertPlanner())
    traj = run_episode(sim, asked, task=task(TWO_CANS), config=NO_RENDER)
    plain = run_episode(sim, PromptBoundExpertPlanner(), task=task(TWO_CANS), config=NO_RENDER)
    # Asking changes nothing: the same episode, and the expert's own answer comes first in every round.
    assert [r.subtask_text for r in traj.rounds] == [r.subtask_text for r in plain.rounds]
    assert traj.goal_satisfied and traj.ended
    assert all(ties and ties[0] == answer for ties, answer in zip(asked.ties, asked.answers, strict=True))
    # Round 1: no can is within reach, so the prompt-bound expert holds them equal and goes to the first by name.
    first = asked.ties[0]
    assert len(first) >= 2 and all(s.action == "Go to" for s in first)
    assert asked.answers[0] == Subtask("Go to", min(str(s.target) for s in first))
    # Once it went to that can, the move is kept: picking it is the only good answer.
    assert asked.answers[1] == Subtask("Pick", asked.answers[0].target)
    assert asked.ties[1] == [asked.answers[1]]


def test_a_perturbed_expert_is_asked_for_its_own_decision_not_an_injection(sim):
    asked = AskFirst(PerturbedExpertPlanner(inject=1.0))
    traj = run_episode(sim, asked, task=task(TWO_CANS), config=EpisodeConfig(render=False, max_rounds=12))
    injected = {i.round_index for i in asked.inner.injections}
    assert injected  # with inject 1.0, every other round after a success
    for index, (ties, answer) in enumerate(zip(asked.ties, asked.answers, strict=True), start=1):
        if index in injected:
            assert answer not in ties  # the injected wrong subtask is never one of the expert's
        else:
            assert ties[0] == answer
    assert traj.rounds


def test_a_collection_records_the_equally_good_subtasks_of_every_round(tmp_path):
    import json

    from homiebot.training.collect import EQUALLY_GOOD_FILE, collect_episodes
    from homiebot.training.offline_eval import read_equally_good

    collect_episodes(tmp_path / "plain", planner="expert", task_ids=["emmoe-001"], seed_offset=10)
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    result = CliRunner().invoke(build_app(), ["data", "collect", "--out", str(tmp_path / "ties"), "--planner", "expert",
                                              "--tasks", "emmoe-001", "--seed-offset", "10", "--equally-good"])
    assert result.exit_code == 0, result.output
    plain, record = tmp_path / "plain" / "episodes" / "emmoe-001" / "run0", tmp_path / "ties" / "episodes" / "emmoe-001" / "run0"
    assert not (plain / EQUALLY_GOOD_FILE).exists()
    rounds = [json.loads(x) for x in (record / "rounds.jsonl").read_text().splitlines() if x.strip()]
    assert rounds == [
        {**json.loads(x), "timings_s": r["timings_s"]}
        for x, r in zip((plain / "rounds.jsonl").read_text().splitlines(), rounds, strict=True)
    ]  # the same episode
    ties = read_equally_good(record)
    assert sorted(ties) == [r["round"] for r in rounds]
    assert all(ties[r["round"]][0].text() == r["subtask_text"] for r in rounds)

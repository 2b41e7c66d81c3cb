"""EMMA's LLM teacher for DAgger (EMMA paper, Algorithm 1 and appendix 6) with a scripted language model: the
actor is the hf planner over that model, the critic's plans go into a memory of three, and the states of a
failed episode are labelled after the critic, from the parallel text world's log up to each state."""

from __future__ import annotations

import pytest

from homiebot.planner.base import PlanRequest
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.hf_backend import HFPlanner
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.testing.scripted_engine import FakeScriptedEngine
from homiebot.training.dagger import LabelingPlanner, TeacherCheck, _episodes, pairs_of
from homiebot.training.teacher import MEMORY_SIZE, LLMTeacher, VisitedState

GO_FRIDGE = "Analysis: the can is in the fridge, so I go there first\nSubtask: [Go to, fridge]\nModel: NoMaD"
OPEN_FRIDGE = "Analysis: I am at the fridge, so I open it\nSubtask: [Open, fridge]\nModel: octo"


def _actor(answers: list[str]) -> tuple[HFPlanner, FakeScriptedEngine]:
    engine = FakeScriptedEngine(answers)
    return HFPlanner(model="scripted", engine=engine, include_history=False), engine  # type: ignore[arg-type]


def test_the_critics_memory_keeps_the_last_three_plans_per_task():
    critic = FakeScriptedEngine([f"Plan: attempt {i}\n\nignored rest" for i in range(5)])
    teacher = LLMTeacher(_actor([])[0], critic)
    for i in range(5):
        assert teacher.reflect("emmoe-001", f"log {i}") == f"Plan: attempt {i}"
    assert teacher.memory_of("emmoe-001") == [f"Plan: attempt {i}" for i in (2, 3, 4)] and MEMORY_SIZE == 3
    assert teacher.memory_of("emmoe-002") == []
    last = critic.seen[-1][-1].text  # the fifth trial's prompt: the failed log, then the three plans before it
    assert last.startswith("Failed attempt:\nlog 4\nSTATUS: FAIL\n")
    assert "Trial 0: Plan: attempt 1\nTrial 1: Plan: attempt 2\nTrial 2: Plan: attempt 3" in last
    assert last.endswith("New plan:") and critic.seen[-1][0].role == "system"
    assert LLMTeacher(_actor([])[0], None).reflect("emmoe-001", "log") is None  # no critic: no memory


def test_an_unparseable_teacher_answer_gives_no_label():
    actor, _ = _actor(["I would look around first."])
    request = PlanRequest("(1) Observation images: x", "Task: t\nInventory: None", (), task="t")
    assert LLMTeacher(actor).label("t", VisitedState(request, "intro")) is None


def test_a_failed_episode_is_labelled_after_the_critics_reflection():
    """The student (scripted) goes to the fridge, then answers End too early: a failed episode. The critic
    reflects on the text world's log of it; then the actor labels both states with that plan in its memory and
    the log up to each state; the pairs are (teacher, student)."""
    from homiebot.sim.base import make_simulator
    from homiebot.tasks.suite import get_task

    student = ScriptedPlanner([GO_FRIDGE, "Analysis: finished\nSubtask: [End]\nModel: None"])
    actor, actor_engine = _actor([GO_FRIDGE, OPEN_FRIDGE])
    critic = FakeScriptedEngine(["Plan: go to the fridge, open it, pick the green_can, put it on the counter."])
    labeler = LabelingPlanner(student, LLMTeacher(actor, critic), oracle=ExpertPlanner())
    sim = make_simulator("mujoco", render=False)
    try:
        from homiebot.config.run import RunConfig, SimulatorConfig

        setting = RunConfig(max_rounds=4, simulator=SimulatorConfig(render=False))  # as train_dagger makes it
        episodes, successes, rounds = _episodes(sim, labeler, [get_task("emmoe-001")], 0, setting)
    finally:
        sim.shutdown()
    assert (episodes, successes, rounds) == (1, 0, 2)

    failed_log = critic.seen[0][-1].text
    assert "You are in the middle of a room" in failed_log and "> [Go to, fridge]\n" in failed_log
    assert "STATUS: FAIL" in failed_log
    first, second = (c[-1].text for c in actor_engine.seen)
    for instruction in (first, second):  # relabelled after the critic: this trial's plan is in the memory
        assert "Trial 0: Plan: go to the fridge, open it" in instruction
        assert "Task: fetch a frozen meat can" in instruction
    assert "> [Go to, fridge]" not in first and "> [Go to, fridge]\n" in second  # the log up to each state
    assert [r.teacher for r in labeler.rounds] == [GO_FRIDGE, OPEN_FRIDGE]
    rows, agreeing = pairs_of(labeler.rounds)
    assert agreeing == 1 and len(rows) == 1 and rows[0]["chosen"] == OPEN_FRIDGE and "[End]" in rows[0]["rejected"]
    # The teacher measured against the privileged expert on the same two states (it does not label them).
    task, plan = labeler.reflections[0]
    assert (
        len(labeler.reflections) == 1 and task.startswith("fetch a frozen meat can") and plan.startswith("Plan: go to")
    )
    checks = [(c.round, c.student, c.teacher, c.oracle) for c in labeler.checks]
    assert checks == [
        (1, "[Go to, fridge]", "[Go to, fridge]", "[Go to, fridge]"),
        (2, "[End]", "[Open, fridge]", "[Open, fridge]"),
    ]
    assert [c.teacher_right for c in labeler.checks] == [True, True]


def test_a_teacher_check_is_right_only_when_its_subtask_is_the_experts():
    right = TeacherCheck("t", 1, "[End]", "[Open, fridge]", "[Open, fridge]")
    same_action = TeacherCheck("t", 2, "[End]", "[Open, drawer]", "[Open, fridge]")
    wrong = TeacherCheck("t", 3, "[End]", "[Pick, green_can]", "[Open, fridge]")
    unparsed = TeacherCheck("t", 4, "[End]", None, "[Open, fridge]")
    assert [c.teacher_right for c in (right, same_action, wrong, unparsed)] == [True, False, False, False]
    assert [c.teacher_action_right for c in (right, same_action, wrong, unparsed)] == [True, True, False, False]


def test_an_llm_teacher_needs_the_text_world():
    labeler = LabelingPlanner(ScriptedPlanner([GO_FRIDGE]), LLMTeacher(_actor([])[0]))
    with pytest.raises(ValueError, match="text world"):
        labeler.plan(PlanRequest("system", "Task: t", (), task="t"))


def test_homie_train_dagger_refuses_a_bad_teacher_model_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from homiebot.cli import build_app

    student = tmp_path / "student"
    student.mkdir()
    (student / "config.json").write_text("{}")
    args = ["train", "dagger", "--model", str(student), "--out", str(tmp_path / "out"), "--tasks", "emmoe-001"]
    result = CliRunner().invoke(build_app(), [*args, "--teacher-model", str(tmp_path / "missing")])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "--teacher-model" in result.output
    assert not (tmp_path / "out").exists()

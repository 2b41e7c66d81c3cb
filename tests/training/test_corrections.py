"""DAgger's corrections for the shipped student (homiebot.training.corrections): which answers a row learns, and
a real collection with the shipped model on llama.cpp labelled by the training expert."""

from __future__ import annotations

import json

import pytest

from homiebot.config import AnswerFormat
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.messages import ChatMessage, report_call
from homiebot.training.corrections import (
    ExpertLabeller,
    LabelledRound,
    collect_corrections,
    episode_rows,
    takeover_row,
)
from homiebot.training.episodes import TrainingDataError


def _round(number: int, agree: bool) -> LabelledRound:
    """Round ``number`` (1-based) of a growing chat: the user turns and the student's answers before it."""
    messages: list[tuple[str, str]] = []
    for k in range(1, number):
        messages += [("user", f"state {k}"), ("assistant", f"Subtask: [Go to, place_{k}]\nModel: PixNav")]
    messages.append(("user", f"state {number}"))
    student = f"Subtask: [Go to, place_{number}]\nModel: PixNav"
    expert = student if agree else f"Subtask: [Pick, thing_{number}]\nModel: RT-1-X"
    return LabelledRound(tuple(messages), student, expert, agree, "", "")


def test_a_row_ends_at_each_disagreement_with_the_experts_answer():
    rounds = [_round(1, True), _round(2, False), _round(3, True), _round(4, True), _round(5, False), _round(6, True)]
    rows = episode_rows(rounds, "emmoe-001_seed1081", max_rows=5)
    assert [r["id"] for r in rows] == ["emmoe-001_seed1081_r2", "emmoe-001_seed1081_r5"]
    first, second = rows
    assert first["messages"][-1] == {"role": "assistant", "content": "Subtask: [Pick, thing_2]\nModel: RT-1-X"}
    # Round 1's agreeing answer is learned in the first row; the disagreeing round 2 is context in the second,
    # rounds 3 and 4 (agreeing, not learned yet) are learned there.
    assert first["answer_loss"] == [True, True]
    assert second["answer_loss"] == [False, False, True, True, True]
    assert second["messages"][-2] == {"role": "user", "content": "state 5"}
    # The student's own answer of round 2 stays in the chat it acted in.
    assert second["messages"][3]["content"] == "Subtask: [Go to, place_2]\nModel: PixNav"


def test_rows_per_episode_are_capped_and_an_agreeing_episode_gives_none():
    looping = [_round(1, True), *(_round(k, False) for k in range(2, 12))]
    assert [r["id"][-3:] for r in episode_rows(looping, "e", max_rows=3)] == ["_r2", "_r3", "_r4"]
    assert episode_rows([_round(1, True), _round(2, True)], "e", max_rows=3) == []


def test_a_student_without_one_growing_chat_is_refused():
    fresh = LabelledRound((("user", "state 2"),), "a", "b", False, "", "")
    with pytest.raises(TrainingDataError, match="growing chat"):
        episode_rows([_round(1, True), fresh], "e", max_rows=3)


def test_evaluation_seeds_and_bad_options_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(TrainingDataError, match="evaluation plays"):
        collect_corrections(tmp_path / "a", task_ids=["emmoe-001"], seed_offset=0)
    with pytest.raises(TrainingDataError, match="unknown task"):
        collect_corrections(tmp_path / "b", task_ids=["emmoe-999"])
    with pytest.raises(TrainingDataError, match="--replay"):
        collect_corrections(tmp_path / "c", task_ids=["emmoe-001"], replay_episodes=3)
    with pytest.raises(TrainingDataError, match="subtask-only"):
        collect_corrections(tmp_path / "d", task_ids=["emmoe-001"], model="smollm2")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "notes.txt").write_text("mine")
    with pytest.raises(TrainingDataError, match="not a corrections collection"):
        collect_corrections(tmp_path / "e", task_ids=["emmoe-001"])
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_a_replay_set_in_another_chat_form_is_refused(tmp_path):
    """Replaying compact-turn episodes to the shipped student (full turns) would teach it a second prompt format."""
    from homiebot.training.build import DATA_FILE, STATS_FILE, write_dataset

    chat = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "Subtask: [End]"}]
    write_dataset([{"id": "ep-0", "messages": chat, "answer_loss": [True]}], tmp_path / "compact" / DATA_FILE)
    (tmp_path / "compact" / STATS_FILE).write_text(json.dumps({"options": {"episodes": True, "compact_turns": True}}))
    with pytest.raises(TrainingDataError, match="compact chat turns, but the student reads full turns"):
        collect_corrections(tmp_path / "out", task_ids=["emmoe-001"], replay=tmp_path / "compact", replay_episodes=1)
    assert not (tmp_path / "out").exists()


class _ChatStudent(Planner):
    """Answers from a script and keeps one growing chat of its answers, as the text-mode hf planner does; the
    labeller's takeover decisions are checked against it here and against the shipped model below."""

    name = "chat-student"
    adopts_answers = True
    answer_format = AnswerFormat.SUBTASK  # the shipped student's

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.chat: list[ChatMessage] = []

    def reset(self, task: str, seed: int = 0) -> None:
        self.chat = []

    def plan(self, request: PlanRequest) -> str:
        sent = [*self.chat, ChatMessage("user", request.instruction)]
        answer = self.answers[request.round_index - 1]
        report_call(request, sent, answer)
        self.chat = [*sent, ChatMessage("assistant", answer)]
        return answer

    def adopt_answer(self, answer: str) -> None:
        self.chat[-1] = ChatMessage("assistant", answer)


class _ScriptedExpert(Planner):
    name = "scripted-expert"

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers

    def plan(self, request: PlanRequest) -> str:
        return f"Analysis: the script says so\n{self.answers[request.round_index - 1]}"  # the expert's format


def _subtask(action: str, target: str = "") -> str:
    models = {"Go to": "NoMaD", "Pick": "RT-1-X", "Put": "RT-1-X", "Open": "Octo"}
    if action == "End":
        return "Subtask: [End]\nModel: None"
    return f"Subtask: [{action}, {target}]\nModel: {models[action]}"


def _play(labeller: ExpertLabeller, rounds: int) -> list[str]:
    """Run the labeller as the loop does; returns what the loop executed."""
    labeller.reset("task", 0)
    executed = []
    for k in range(1, rounds + 1):
        request = PlanRequest(system_prompt="", instruction=f"state {k}", images=(), round_index=k)
        executed.append(labeller.plan(request))
    return executed


def test_a_takeover_executes_the_students_first_mistake_then_the_experts_answers():
    student = [_subtask("Go to", "table"), _subtask("Pick", "cup"), _subtask("Go to", "sink"),
               _subtask("Pick", "cup"), _subtask("End")]
    expert = [_subtask("Go to", "table"), _subtask("Go to", "sink"), _subtask("Go to", "table"),
              _subtask("Pick", "cup"), _subtask("End")]
    labeller = ExpertLabeller(_ChatStudent(student), _ScriptedExpert(expert), takeover=1)
    executed = _play(labeller, 5)
    # Round 2's mistake (Pick at the table before going to the sink) is executed; round 3 disagrees again, so the
    # expert acts from there on, and the student's chat keeps the expert's answers.
    assert executed[:2] == student[:2]
    assert labeller.taken_over_at == 3
    assert [r.executed_mistake for r in labeller.rounds] == [False, True, False, False, False]
    row = takeover_row(labeller.rounds, "t_seed1")
    answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert answers[0] == student[0] and answers[1] == student[1]  # the mistake stays as context
    assert "Go to, table" in answers[2] and answers[4].startswith("Subtask: [End]")
    assert row["answer_loss"] == [True, False, True, True, True]
    assert len(answers) == len(row["answer_loss"]) == 5


def test_a_disagreeing_end_is_never_executed_the_expert_takes_over_there():
    student = [_subtask("Go to", "table"), _subtask("End"), _subtask("End")]
    expert = [_subtask("Go to", "table"), _subtask("Pick", "cup"), _subtask("End")]
    labeller = ExpertLabeller(_ChatStudent(student), _ScriptedExpert(expert), takeover=2)
    executed = _play(labeller, 3)
    assert labeller.taken_over_at == 2 and "Pick, cup" in executed[1]
    assert takeover_row(labeller.rounds, "t")["answer_loss"] == [True, True, True]


def test_a_takeover_row_refuses_a_student_whose_chat_lost_the_adopted_answers():
    class Forgetful(_ChatStudent):
        def adopt_answer(self, answer: str) -> None:  # claims the capability, keeps its own answer
            pass

    student = [_subtask("Go to", "sink"), _subtask("Go to", "sink"), _subtask("End")]
    expert = [_subtask("Go to", "table"), _subtask("Pick", "cup"), _subtask("End")]
    labeller = ExpertLabeller(Forgetful(student), _ScriptedExpert(expert), takeover=1)
    _play(labeller, 3)
    with pytest.raises(TrainingDataError, match="does not hold the answers executed"):
        takeover_row(labeller.rounds, "t")


def test_takeover_needs_a_student_that_adopts_answers_and_a_count_of_one_or_more():
    with pytest.raises(TrainingDataError, match="cannot keep another answer"):
        ExpertLabeller(_ScriptedExpert([]), _ScriptedExpert([]), takeover=1)
    with pytest.raises(TrainingDataError, match=">= 1"):
        ExpertLabeller(_ChatStudent([]), _ScriptedExpert([]), takeover=0)


@pytest.mark.models
@pytest.mark.slow
def test_the_shipped_student_plays_with_noise_and_the_expert_labels_its_states(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("llama_cpp")
    import pyarrow.parquet as pq

    out = tmp_path / "corrections"
    # emmoe-047 on seed offset 22 with EMMOE's noise: the student drops a box and then repeats a Pick that cannot
    # reach it (measured on 2026-11-29); the expert picks the other box.
    summary = collect_corrections(out, task_ids=["emmoe-047"], noise="emmoe", max_per_episode=2)
    assert summary.episodes == 1 and summary.disagreements >= 1 and summary.rows >= 1
    episode = json.loads((out / "episodes" / "emmoe-047" / "run0" / "corrections.json").read_text())
    assert episode["seed"] == 22 + 2739
    assert len(episode["rounds"]) == len(episode["codes"])
    assert sum(not r["agree"] for r in episode["rounds"]) == summary.disagreements
    rows = pq.read_table(out / "data" / "train.parquet").to_pylist()
    assert len(rows) == summary.rows <= 2
    for row in rows:
        answers = [m for m in row["messages"] if m["role"] == "assistant"]
        assert len(answers) == len(row["answer_loss"]) and row["answer_loss"][-1]
        assert row["messages"][0]["content"].startswith("Task: ")  # the growing chat, no system turn
        assert answers[-1]["content"].startswith("Subtask: [")
    stats = json.loads((out / "sft.json").read_text())
    assert stats["correction_rows"] == len(rows) and stats["student_episodes"] == 1
    # A rerun with the same settings plays nothing and writes the same rows; other settings are refused.
    again = collect_corrections(out, task_ids=["emmoe-047"], noise="emmoe", max_per_episode=2)
    assert again.skipped == 1 and again.episodes == 0
    assert pq.read_table(out / "data" / "train.parquet").to_pylist() == rows
    with pytest.raises(TrainingDataError, match="other settings"):
        collect_corrections(out, task_ids=["emmoe-047"], noise="off", max_per_episode=2)


@pytest.mark.models
@pytest.mark.slow
def test_a_takeover_episode_of_the_shipped_student_plays_the_recovery_through(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("llama_cpp")
    import pyarrow.parquet as pq

    out = tmp_path / "takeover"
    # emmoe-020 without noise on seed offset 24: the student goes to the oven instead of the kitchen drawer (its
    # mistake, executed), disagrees again at the next round, and the expert closes the drawer and the oven and ends
    # the episode (measured on 2026-12-01: taken over at round 4 of 6, solved).
    summary = collect_corrections(out, task_ids=["emmoe-020"], noise="off", seed_offset=24, takeover=1)
    episode = json.loads((out / "episodes" / "emmoe-020" / "run0" / "corrections.json").read_text())
    assert summary.episodes == 1 and summary.taken_over == 1 and episode["solved"]
    acted = [r["acted"] for r in episode["rounds"]]
    start = episode["taken_over_at"] - 1
    assert set(acted[:start]) == {"student"} and set(acted[start:]) == {"expert"}
    mistakes = [r["acted"] == "student" and not r["agree"] for r in episode["rounds"]]
    assert sum(mistakes) == 1
    (row,) = pq.read_table(out / "data" / "train.parquet").to_pylist()
    answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert len(answers) == len(episode["rounds"]) and answers[-1].startswith("Subtask: [End]")
    assert row["answer_loss"] == [not m for m in mistakes]  # the executed mistake is context, the rest learned
    assert json.loads((out / "sft.json").read_text())["taken_over_episodes"] == 1
    settings = json.loads((out / "collect.json").read_text())
    assert settings["takeover"] == 1 and settings["max_per_episode"] is None  # one row per episode, not a cap
    with pytest.raises(TrainingDataError, match="other settings"):
        collect_corrections(out, task_ids=["emmoe-020"], noise="off", seed_offset=24, takeover=2)

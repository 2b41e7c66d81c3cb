"""A synthetic record set with EMMOE-100's counts (EMMOE paper: 966 subtasks, 36 failed, 100 tasks; 90 train with
829 successful subtasks and 29 failures, 10 test with 101 and 7), written by the real episode recorder."""

from __future__ import annotations

import json
from pathlib import Path

from homiebot.data.record import EpisodeRecorder
from homiebot.planner.prompt import build_instruction, format_output, history_entry, system_prompt
from homiebot.types import ErrorCode, Feedback, PlannerOutput, RoundRecord, Subtask, Trajectory

# A cycle of successful subtasks: consecutive ones always differ, every model and action of the lists appears.
CYCLE = (
    (Subtask("Go to", "fridge"), "NoMaD", ()),
    (Subtask("Open", "fridge"), "octo", ()),
    (Subtask("Pick", "apple"), "RT-1-X", ("apple",)),
    (Subtask("Go to", "table"), "PixNav", ("apple",)),
    (Subtask("Put", "apple", "table"), "RT-1-X", ()),
    (Subtask("Close", "fridge"), "octo", ()),
)
FAILED = (Subtask("Put", "banana", "sink"), "RT-1-X", ErrorCode.L2, "Unable to put, the hand is empty")


def plan_episodes() -> list[tuple[str, str, int, bool]]:
    """(task id, split, successful rounds incl. End, with one failure) for the 100 synthetic tasks."""
    plan = []
    for i in range(90):
        plan.append((f"syn-{i + 1:03d}", "train", 10 if i < 19 else 9, i < 29))
    for i in range(10):
        plan.append((f"syn-{91 + i:03d}", "test", 11 if i == 0 else 10, i < 7))
    return plan


def write_episode(out: Path, task: str, successes: int, failure: bool, with_images: bool = False) -> None:
    """One successful episode: ``successes - 1`` subtasks of the cycle then End, with one decision error (L2)
    inserted before the second subtask when ``failure``."""
    steps: list[tuple[Subtask, str, tuple[str, ...], ErrorCode, str]] = []
    for n in range(successes - 1):
        sub, model, held = CYCLE[n % len(CYCLE)]
        steps.append((sub, model, held, ErrorCode.OK, "None"))
    if failure:
        sub, model, code, message = FAILED
        inventory_then = steps[0][2]
        steps.insert(1, (sub, model, inventory_then, code, message))
    steps.append((Subtask("End"), "None", (), ErrorCode.OK, "None"))
    instruction = f"tidy task {task}"
    trajectory = Trajectory(task_id=task, instruction=instruction, scene="apartment_1", seed=0, planner="expert")
    recorder = EpisodeRecorder(out, images=with_images, video=False)
    recorder.start(trajectory)
    history, feedback = "", "None"
    inventory: tuple[str, ...] = ()
    for index, (sub, model, after, code, message) in enumerate(steps, 1):
        text = build_instruction(instruction, inventory, history, feedback)
        analysis = f"step {index} of {task}, so I should do {sub.text()}"
        output = PlannerOutput(raw=format_output(analysis, sub, model), analysis=analysis, subtask=sub, model=model)
        record = RoundRecord(
            index=index,
            instruction=text,
            output=output,
            feedback=Feedback(code, message, inventory=after),
            inventory_before=inventory,
        )
        trajectory.rounds.append(record)
        recorder.add_round(record, None)
        history += history_entry(index, sub.text().strip("[]"), "success" if code is ErrorCode.OK else "fail")
        feedback, inventory = message, after
    trajectory.ended, trajectory.goal_satisfied = True, True
    trajectory.system_prompt = system_prompt()
    recorder.note(system_prompt=trajectory.system_prompt, conversation=[])
    recorder.finish(trajectory)


def write_record_set(root: Path) -> Path:
    """An evaluation-like directory (eval.json with the splits, episodes/<task>/run0/)."""
    plan = plan_episodes()
    root.mkdir(parents=True, exist_ok=True)
    (root / "eval.json").write_text(json.dumps({"tasks": {t: {"split": s} for t, s, _, _ in plan}}), encoding="utf-8")
    for task, _, successes, failure in plan:
        write_episode(root / "episodes" / task / "run0", task, successes, failure)
    return root

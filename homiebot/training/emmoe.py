"""EMMOE's SFT and DPO data (EMMOE paper: section 4.1, appendices B.3, F.1 and F.2), from HomieBot's records.

Two prompt formats (the paper trained on one wording and ran on another; docs/training.md):

* ``paper``: the record is first written in EMMOE's raw per-task layout (:func:`info_text`, appendix B.3:
  ``Task:`` line, then per subtask ``SubtaskN: [..] (Model)`` / ``Analysis:`` / ``Feedback:`` /
  ``Inventory:``), then converted exactly as appendix F.1 does (:func:`convert_info`): the instruction ends
  with "Now, please output Analysis, Subtask and Model, according to the instruction above." and the
  history is ``(n)[Action, target] (Model) (success)``. This reproduces the appendix's samples byte for byte.
* ``runtime`` (default): the prompt is what the planner's model was sent in that round when the record holds
  it (``rounds.jsonl``'s ``model_calls``: the system turn, earlier turns, world description and instruction as
  sent, :func:`recorded_step`), else the instruction text the loop sent (``instruction``, appendix D's wording)
  after the system information the record kept, so that what is trained is what is deployed.

Both give a list of :class:`Step` per episode; :func:`sift` and :func:`augment` are appendix F.2's
``data_sift`` and ``dpo_augment`` over those steps, with these decisions (each tested):

* chosen / rejected are ``"Subtask: [..]\\nModel: .."`` rebuilt from the *parsed* subtask (the paper drops the
  first line of the answer, which is the Analysis only when the analysis is one line);
* a pair whose chosen equals its rejected is dropped (a model outside the swap table; a re-plan that
  repeats the failed subtask);
* re-plan pairs come from decision errors only (L, D and F codes) unless execution errors are asked for:
  an E1 says the skill failed three times, not that the decision was wrong;
* the model and action substitutions act on the parsed model and action token, not on the whole text
  (the paper's ``str.replace`` would also rewrite an object called ``Put...``);
* the order-change partner is the next SFT sample of the same episode (for the last non-End subtask that
  is the End answer, the only way End enters the DPO data: as a rejected answer, section 4.1).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from homiebot.planner.prompt import format_output, split_subtask
from homiebot.training.episodes import DECISION_ERRORS, EpisodeData
from homiebot.types import Subtask

#: Appendix F.1's closing sentence of a training instruction.
PAPER_SUFFIX = "Now, please output Analysis, Subtask and Model, according to the instruction above."

#: Appendix F.2 ``model_change``: a model of the same type (navigation, manipulation).
MODEL_SWAP = {"NoMaD": "PixNav", "PixNav": "NoMaD", "octo": "RT-1-X", "RT-1-X": "octo"}
#: Appendix F.2 ``action_change``: names outside the action list.
ACTION_SWAP = {"Pick": "Fetch", "Put": "Place", "Go to": "Move", "Open": "Pull", "Close": "Push"}

PAIR_KINDS = ("replan", "model_change", "order_change", "action_change")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def info_text(episode: EpisodeData) -> str:
    """The episode in EMMOE's raw per-task layout (appendix B.3), blocks separated by one blank line.

    ``Feedback`` and ``Inventory`` are the results after the subtask (the paper's convention). An answer that
    could not be parsed is written as a failed subtask ``[Unparseable]`` with its text as the analysis.
    """
    blocks = [f"Task: {_one_line(episode.instruction)}"]
    for n, r in enumerate(episode.rounds, 1):
        if r.subtask is None:
            decision, analysis = "[Unparseable] (None)", _one_line(r.raw_output) or "None"
        elif r.is_end:
            decision, analysis = "[End]", _one_line(r.analysis)
        else:
            decision, analysis = f"{r.subtask.text()} ({_one_line(r.model) or 'None'})", _one_line(r.analysis)
        feedback = "None" if r.succeeded else (_one_line(r.feedback) or r.error_code)
        inventory = " ".join(r.inventory) or "None"
        blocks.append(f"Subtask{n}: {decision}\nAnalysis: {analysis}\nFeedback: {feedback}\nInventory: {inventory}")
    return "\n\n".join(blocks) + "\n"


def convert_info(content: str, task_id: str, save_dir: str, check_images: bool = True) -> list[dict]:
    """Appendix F.1's conversion of one raw task file into conversation samples, one per subtask.

    ``task_id``: the sample id's prefix (the paper derives ``21_info`` from ``data/train/21/info.txt``);
    ``save_dir``: where the ``subtaskN_{front,left,back,right}.png`` views are (their paths go into the
    sample; ``check_images`` raises ``FileNotFoundError`` for a missing one, as the paper's script does).
    Failed subtasks are still in the result; :func:`sift` removes them.
    """
    blocks = content.split("\n\n")
    task = blocks[0]
    historical = ""
    inventory = feedback = ""
    samples = []
    for i, block in enumerate(blocks[1:]):
        lines = block.strip().split("\n")
        if lines[0] == "":
            continue
        subtask_id, decision = lines[0].split(": ", 1)
        subtask_id = subtask_id.lower()
        analysis = lines[1]
        if "End" not in decision:
            action, model_choice = decision.strip(")").split(" (")
        else:
            action, model_choice = "[End]", "None"
        image_paths = [
            os.path.join(save_dir, f"{subtask_id}_{view}.png") for view in ("front", "left", "back", "right")
        ]
        if check_images:
            for path in image_paths:
                if not os.path.exists(path):
                    raise FileNotFoundError(f"File does NOT exist: {path}")
        if i == 0:
            instruction = f"{task}\nInventory: None\nHistorical Execution: None\nFeedback: None\n{PAPER_SUFFIX}"
        else:
            instruction = f"{task}\n{inventory}\nHistorical Execution:{historical}\n{feedback}\n{PAPER_SUFFIX}"
        answer = f"{analysis}\nSubtask: {action}\nModel: {model_choice}"
        feedback = lines[2]
        inventory = lines[3]
        historical += f"({i + 1}){decision} ({'success' if 'None' in feedback else 'fail'})\n"
        samples.append(
            {
                "id": f"{task_id}_{subtask_id}",
                "image": image_paths,
                "conversations": [{"from": "human", "value": instruction}, {"from": "gpt", "value": answer}],
            }
        )
    return samples


@dataclass(frozen=True)
class Step:
    """One subtask as a training sample: its prompt, its answer and whether it succeeded."""

    id: str
    episode: str  # EpisodeData.key (+ variant)
    system: str | None  # the system turn sent before the prompt (runtime format), None without one
    prompt: str  # the user turn (the paper's human value)
    analysis: str
    subtask: Subtask | None
    model: str
    succeeded: bool
    error_code: str
    images: tuple[str, ...]
    #: The turns between the system turn and the prompt, (role, text) each: the earlier chat a model planner was
    #: sent with the round (a text model's growing chat, a windowed history), from the record's model input.
    context: tuple[tuple[str, str], ...] = ()
    #: The error code of the episode's previous round when that round failed (this step re-plans after it).
    after_error: str | None = None

    @property
    def is_end(self) -> bool:
        return self.subtask is not None and self.subtask.action.strip().lower() == "end"

    def answer(self) -> str:
        """The SFT target: ``Analysis: ..\\nSubtask: [..]\\nModel: ..`` (appendix F.1)."""
        assert self.subtask is not None
        return format_output(self.analysis, self.subtask, "None" if self.is_end else self.model)

    def decision(self, subtask: Subtask | None = None, model: str | None = None) -> str:
        """A DPO side: the answer without its Analysis line (appendix F.2)."""
        sub = subtask or self.subtask
        assert sub is not None
        return decision_answer(sub, model if model is not None else self.model)


def decision_answer(subtask: Subtask, model: str) -> str:
    """An answer without the Analysis line (appendix F.2's DPO sides; PARTNR appendix A.10's "thoughtless" SFT
    samples, the shipped model's ``answer_format=subtask``); End names no model."""
    is_end = subtask.action.strip().lower() == "end"
    return f"Subtask: {subtask.text()}\nModel: {'None' if is_end else model}"


def paper_steps(episode: EpisodeData, key: str, image_dir: str | None) -> list[Step]:
    """The episode's steps in the ``paper`` format (raw export, then appendix F.1's conversion).

    ``image_dir``: the folder the views are (or will be) in, as written into the samples; None: no images."""
    samples = convert_info(info_text(episode), key, image_dir or "", check_images=False)
    steps = []
    codes = ["OK", *(r.error_code for r in episode.rounds)][: len(episode.rounds)]
    for sample, record, previous_code in zip(samples, episode.rounds, codes, strict=True):
        answer = sample["conversations"][1]["value"]
        analysis, subtask_line, model_line = answer.split("\n")
        subtask = None if record.subtask is None else split_subtask(subtask_line.removeprefix("Subtask: "))
        steps.append(
            Step(
                id=sample["id"],
                episode=key,
                system=None,
                prompt=sample["conversations"][0]["value"],
                analysis=analysis.removeprefix("Analysis: "),
                subtask=subtask,
                model=model_line.removeprefix("Model: "),
                succeeded=record.succeeded,
                error_code=record.error_code,
                images=tuple(sample["image"]) if image_dir is not None else (),
                after_error=None if previous_code == "OK" else previous_code,
            )
        )
    return steps


def runtime_steps(episode: EpisodeData, key: str, system: str | None, original_task: str | None = None) -> list[Step]:
    """The episode's steps in the ``runtime`` format: the recorded instruction of each round.

    ``original_task``: the task text as the loop sent it, when ``episode.instruction`` is a rewrite of it
    (the rewrite replaces it at the head of every instruction).
    """
    steps = []
    previous_code = "OK"
    for r in episode.rounds:
        prompt = r.instruction
        if original_task is not None and original_task != episode.instruction:
            head = f"Task: {original_task}\n"
            if prompt.startswith(head):
                prompt = f"Task: {episode.instruction}\n" + prompt[len(head) :]
        steps.append(
            Step(
                id=f"{key}_subtask{r.index}",
                episode=key,
                system=system,
                prompt=prompt,
                analysis=_one_line(r.analysis),
                subtask=r.subtask,
                model=r.model,
                succeeded=r.succeeded,
                error_code=r.error_code,
                images=r.images,
                after_error=None if previous_code == "OK" else previous_code,
            )
        )
        previous_code = r.error_code
    return steps


@dataclass(frozen=True)
class Pair:
    """One DPO sample (appendix F.2: prompt, chosen, rejected)."""

    kind: str  # one of PAIR_KINDS
    step: Step  # whose prompt (and system turn, images) the pair uses
    chosen: str
    rejected: str


@dataclass
class SiftResult:
    sft: list[Step]
    replans: list[Pair]
    dropped_failed: int  # failed subtasks left out of the SFT data
    replans_skipped: dict[str, int]


def sift(steps: Sequence[Step], replan_from_execution_errors: bool = False) -> SiftResult:
    """Appendix F.2 ``data_sift`` on one episode's steps.

    A subtask goes into the SFT data when it succeeded; the last one (End) always does. A re-plan pair is made
    when subtask j failed and j+1 succeeded and is not the last: prompt = the failed subtask's prompt,
    chosen = the re-plan's decision, rejected = the failed decision. After two failures in a row only the
    second is paired (the paper's ``flag``).
    """
    sft: list[Step] = []
    replans: list[Pair] = []
    skipped = {"execution error": 0, "unparseable": 0, "chosen equals rejected": 0}
    dropped = 0
    last = len(steps) - 1
    for j, step in enumerate(steps):
        if j == last or step.succeeded:
            if step.subtask is not None:
                sft.append(step)
            continue
        dropped += 1
        if j + 1 >= last or not steps[j + 1].succeeded:
            continue
        replan = steps[j + 1]
        if step.error_code not in DECISION_ERRORS and not replan_from_execution_errors:
            skipped["execution error"] += 1
            continue
        if step.subtask is None or replan.subtask is None:
            skipped["unparseable"] += 1
            continue
        chosen, rejected = replan.decision(), step.decision()
        if chosen == rejected:
            skipped["chosen equals rejected"] += 1
            continue
        replans.append(Pair("replan", step, chosen, rejected))
    return SiftResult(sft, replans, dropped, skipped)


def model_change(step: Step) -> str | None:
    swapped = MODEL_SWAP.get(step.model.strip())
    return None if swapped is None else step.decision(model=swapped)


def action_change(step: Step) -> str | None:
    assert step.subtask is not None
    swapped = ACTION_SWAP.get(step.subtask.action.strip())
    if swapped is None:
        return None
    sub = step.subtask
    return step.decision(subtask=Subtask(swapped, sub.target, sub.place))


def augment(sft: Sequence[Step]) -> tuple[list[Pair], dict[str, int]]:
    """Appendix F.2 ``dpo_augment`` over the concatenated SFT steps: for every non-End step, a model change,
    an order change (the next SFT step's decision, in the same episode) and an action change."""
    pairs: list[Pair] = []
    dropped = {"model outside the swap table": 0, "action outside the swap table": 0, "chosen equals rejected": 0}
    for i, step in enumerate(sft):
        if step.is_end:
            continue
        chosen = step.decision()
        if i + 1 >= len(sft) or sft[i + 1].episode != step.episode:
            raise ValueError(f"{step.id}: the episode's SFT steps do not end with [End]; cannot order-change it")
        candidates = (
            ("model_change", model_change(step), "model outside the swap table"),
            ("order_change", sft[i + 1].decision(), ""),
            ("action_change", action_change(step), "action outside the swap table"),
        )
        for kind, rejected, why_none in candidates:
            if rejected is None:
                dropped[why_none] += 1
            elif rejected == chosen:
                dropped["chosen equals rejected"] += 1
            else:
                pairs.append(Pair(kind, step, chosen, rejected))
    return pairs, dropped


def step_messages(step: Step) -> list[dict[str, str]]:
    """The prompt as chat messages (system turn only in the runtime format; earlier turns from a model input)."""
    messages = [] if step.system is None else [{"role": "system", "content": step.system}]
    messages += [{"role": role, "content": text} for role, text in step.context]
    return [*messages, {"role": "user", "content": step.prompt}]


def recorded_step(step: Step, model_input: Sequence[tuple[str, str]], system_turn: bool = True,
                  original_task: str | None = None, task: str | None = None) -> Step:
    """``step`` with the chat its round's model was sent (:attr:`~homiebot.training.episodes.RoundData.model_input`)
    as its prompt: the system turn (dropped when not ``system_turn``), the earlier turns, the last user turn. A
    rewritten ``task`` replaces ``Task: {original_task}`` in every user turn (the earlier answers stay as the model
    wrote them). An input that does not end with a user turn leaves the step as it is."""
    messages = list(model_input)
    system = None
    if messages and messages[0][0] == "system":
        system = messages[0][1] if system_turn else None
        messages = messages[1:]
    if not messages or messages[-1][0] != "user":
        return step
    if task is not None and original_task is not None and task != original_task:
        head, new_head = f"Task: {original_task}\n", f"Task: {task}\n"
        messages = [(role, text.replace(head, new_head) if role == "user" else text) for role, text in messages]
    return replace(step, system=system, context=tuple(messages[:-1]), prompt=messages[-1][1])


def sample_dir(out: Path, key: str) -> Path:
    return out / "images" / key

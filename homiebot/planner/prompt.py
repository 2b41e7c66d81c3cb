"""EMMOE's prompt and output format (EMMOE paper, appendices D and H.1), kept word for word.

Decisions where the paper is ambiguous (tested in ``tests/core/test_prompt.py``):

* The live instruction uses appendix D's ``generate_instruction`` wording ("Now based on the instruction
  above, please output Analysis, Subtask and Model in mentioned format."). Appendix F.1's SFT wording is
  produced by :mod:`homiebot.data` for training files only.
* The historical-execution string is appendix D's ``f"({round}) {subtask}({signal}) "`` where ``subtask`` is
  the text between the brackets of the Subtask line, as the planner wrote it.
* The action and model lists in the system prompt are the paper's by default and the deployment's when it
  configures others; the model-description sentence is kept for the paper's models and generated for others.
* The subtask-only answer (:class:`~homiebot.config.AnswerFormat` ``subtask``, ``Subtask: [..]\nModel: ..``
  with no Analysis line) is read only for a planner configured with it: a model trained on PARTNR-style
  action-only samples (PARTNR appendix A.10; ``homie data build sft --thoughtless``). Its analysis is recorded
  as empty. The prompt is the same in both formats (it is what the data were built with); a planner in the
  analysis format that leaves the Analysis out still gets F1, as in the paper.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from homiebot.config import AnswerFormat
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, PlannerOutput, Subtask

_PAPER_MODEL_DESCRIPTION = (
    "NoMaD can go to a spot like living room, PixNav focuses on object navigation and can go to a object, "
    "octo can handle with open and close, RT-1-X is good at picking and putting."
)

_SYSTEM_TEMPLATE = """You are a powerful housework assistant, I will give you following information for you to make a decision toward the final task.
(1) Observation images: Four first-person perspective images of the current environment, in the order of front, left, back, and right.
(2) Task: Your final goal.
(3) Inventory: Your current assets, remember that you are a one-hand agent, which means you cant open or pick when your Inventory is not None, and you cant put if your Inventory is None, this is very important.
(4) Historical Execution: Subtasks that were already fulfilled in the history, and the execution status of each subtask(success or fail). You need to make decisions based on historical actions, current circumstances and your final task.
(5) Feedback: Feedback will provide error information of the last execution, it will be None if the last execution ends successfully.
You should output with following formats:
Analysis: Make a detailed summary of your current situation based on given information, analyse and decide what to do next and output the reason of your decision.
Subtask: [action, target], choose your action from the action list [{actions}], and the target can be a place or a object from your observation. If you choose Put as your action, output in format [Put, object, place] which means put the object to the place. If the final task is done and no more action is needed, just output [End].
Model: Choose one most suitable model in the model list [{models}]. {model_description}
You need to focus on the consistency with previous subtasks. You should pay attention to current Inventory and avoid conflicts.
Remember you can only go to the place and interact with the objects you observe in your sight.
Remember the logic between outputs, it is recommended to open the receptacle before you pick something because you cant open while holding, and its recommended to arrive the object place before you interact with it.
Remember you just need to output the next subtask to be fulfilled and dont output a whole plan, this is very important.
Remember you should output strictly with the response template.
Now, I will send the message so that you can make planning accordingly."""

#: Appendix H.1: the in-context example given to small open models before each inference.
ICL_EXAMPLE_USER = (
    "here is an example output, please strictly follow its format and system reminders in your output:\n"
    "Analysis: According to my final task, I need to fetch apples first, but it\u2019s a better choice to go the "
    "fridge and open it first, which will avoid potential conflicts, so I should go to the fridge next\n"
    "Subtask: [Go to, fridge]\nModel: NoMaD\n"
)
ICL_EXAMPLE_ASSISTANT = "I will surely follow the given format, now you can send prompt to me."

INSTRUCTION_SUFFIX = "Now based on the instruction above, please output Analysis, Subtask and Model in mentioned format.\n"

#: Appendix D's strict pattern and appendix H.1's relaxed fallback.
STRICT_PATTERN = re.compile(r".*Analysis: *(.+?) *Subtask: *\[(.*?)\].*Model: *(.*?)$", re.DOTALL)
RELAXED_PATTERN = re.compile(r".*Analysis: *(.+?) *Subtask: *(.*?) *Model: *(.*?)$", re.DOTALL)
#: The same two without the Analysis line (the subtask-only format), tried after them.
SUBTASK_ONLY_PATTERN = re.compile(r".*?Subtask: *\[(.*?)\].*Model: *(.*?)$", re.DOTALL)
SUBTASK_ONLY_RELAXED_PATTERN = re.compile(r".*?Subtask: *(.*?) *Model: *(.*?)$", re.DOTALL)


def system_prompt(
    actions: Sequence[str] = EMMOE_ACTIONS,
    models: Sequence[str] = EMMOE_MODELS,
    model_descriptions: dict[str, str] | None = None,
) -> str:
    """The system information of appendix D, with the deployment's action and model lists."""
    if tuple(models) == EMMOE_MODELS and not model_descriptions:
        description = _PAPER_MODEL_DESCRIPTION
    else:
        descriptions = model_descriptions or {}
        description = " ".join(f"{m} {descriptions[m]}." for m in models if m in descriptions)
    return _SYSTEM_TEMPLATE.format(
        actions=", ".join(actions), models=", ".join(models), model_description=description
    ).replace(" \nYou need", "\nYou need")


def format_inventory(inventory: Sequence[str]) -> str:
    """Appendix D ``get_inventory``: "None" when empty, else the items joined by spaces."""
    return "None" if not inventory else " ".join(inventory)


def build_instruction(task: str, inventory: Sequence[str], historical_execution: str, feedback: str) -> str:
    """Appendix D ``generate_instruction``."""
    if historical_execution == "":
        return (
            f"Task: {task}\nInventory: {format_inventory(inventory)}\nHistorical Execution: None\n"
            f"Feedback: None\n{INSTRUCTION_SUFFIX}"
        )
    return (
        f"Task: {task}\nInventory: {format_inventory(inventory)}\nHistorical Execution: {historical_execution}\n"
        f"Feedback: {feedback}\n{INSTRUCTION_SUFFIX}"
    )


def history_entry(round_index: int, subtask_text: str, signal: str) -> str:
    """One appendix D history item: ``(3) Go to, fridge(success) ``."""
    return f"({round_index}) {subtask_text}({signal}) "


def split_subtask(body: str) -> Subtask:
    """Split the text inside ``[...]`` into action, target and place (commas separate; extra parts join the place)."""
    parts = [p.strip() for p in body.strip().strip("[]").split(",")]
    parts = [p for p in parts if p != ""]
    if not parts:
        return Subtask(action="")
    action = parts[0]
    target = parts[1] if len(parts) > 1 else None
    place = ", ".join(parts[2:]) if len(parts) > 2 else None
    return Subtask(action=action, target=target, place=place)


def parse_output(text: str, answer_format: AnswerFormat = AnswerFormat.ANALYSIS) -> PlannerOutput:
    """Parse a planner answer with appendix D's pattern, falling back to appendix H.1's relaxed one.

    With ``answer_format`` ``subtask`` an answer without the Analysis line is read too (its analysis empty); one
    with an Analysis line still gives it. Never raises: an answer no pattern accepts comes back with
    ``subtask=None`` and ``parse_error`` set, which the loop turns into F1 format feedback.
    """
    if not isinstance(text, str):
        return PlannerOutput(raw=repr(text), parse_error="the output is not text")
    analysis, body, model_text = "", None, None
    for pattern in (STRICT_PATTERN, RELAXED_PATTERN):
        match = pattern.search(text)
        if match is not None:
            analysis, body, model_text = match.group(1).strip(), match.group(2), match.group(3)
            break
    if model_text is None and answer_format is AnswerFormat.SUBTASK:
        for pattern in (SUBTASK_ONLY_PATTERN, SUBTASK_ONLY_RELAXED_PATTERN):
            match = pattern.search(text)
            if match is not None:
                body, model_text = match.group(1), match.group(2)
                break
    if model_text is None:
        template = "Analysis: ... Subtask: [action, target] Model: ..."
        if answer_format is AnswerFormat.SUBTASK:
            template = "Subtask: [action, target] Model: ..."
        return PlannerOutput(raw=text, parse_error=f"the output does not follow the template '{template}'")
    model = model_text.strip().splitlines()[0].strip() if model_text.strip() else ""
    subtask = split_subtask(body or "")
    if subtask.action == "":
        return PlannerOutput(raw=text, analysis=analysis, model=model, parse_error="the Subtask line names no action")
    return PlannerOutput(raw=text, analysis=analysis, subtask=subtask, model=model)


def format_output(analysis: str, subtask: Subtask, model: str) -> str:
    """The answer text in the trained format (appendix F.1): ``Analysis: ...\\nSubtask: [..]\\nModel: ..``."""
    return f"Analysis: {analysis}\nSubtask: {subtask.text()}\nModel: {model}"

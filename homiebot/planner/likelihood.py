"""SayCan-style subtask choice: the grammar's subtasks ranked by the model's likelihood, no free generation.

SayCan (Ahn et al. 2022, "Do As I Can, Not As I Say: Grounding Language in Robotic Affordances", section 3) never
lets the language model write: it scores the text of every skill the robot has by the model's probability of that
text after the prompt and executes the best one. Here the skills are the subtasks the constrained grammar allows
(:class:`~homiebot.planner.constrained.AnswerConstraint`: the offered actions, each with the grounded targets its
arity takes), written as the subtask-only answer's first line, ``Subtask: [Pick, apple]``. SayCan multiplies the
score by an affordance (a value function); EMMOE's executor already refuses infeasible subtasks with its error
codes and the planner re-plans, so the score here is the model's alone: what the issue's comparison asks for
("rank the grammar's valid subtasks by the model's likelihood").

Decisions:

* **The score** is the mean log-probability of the line's tokens, ``]`` included (so a name is not favoured for
  being the prefix of a longer one). SayCan's skills are phrases of similar length and it ranks their
  probability; here ``[End]`` is three tokens and ``[Put, apple_1, kitchen_counter]`` ten, and the plain
  probability chose End in every round of SmolLM2 as shipped (measured on emmoe-001): the mean per token is the
  usual correction when candidates differ in length (GPT-3's multiple-choice scoring, Brown et al. 2020,
  section 2.4).
* **Two targets** (``Put``) would be targets x targets lines (900 with 30 names): the object is chosen first, by
  the line up to and including its comma (``Subtask: [Put, apple,``: a comma is a token of its own for SmolLM2's
  byte-level BPE, so the line's tokens are this prefix's followed by the place's), the best
  :data:`PUT_BEAM` objects are kept, and their lines with every place are scored whole.
* **The Model line** is chosen after the subtask the same way, among the models the grammar allows after that
  action (``None`` for End in the subtask-only format), by the likelihood of ``\\nModel: M``.
* The grammar's free-form target (no grounded name) cannot be enumerated: refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from homiebot.planner.constrained import AnswerConstraint, subtask_arities

#: Objects of a two-target subtask kept for the place's stage.
PUT_BEAM = 3
#: The subtask line's head and the Model line's, as the subtask-only answer writes them.
SUBTASK_HEAD = "Subtask: ["
MODEL_HEAD = "\nModel: "

#: Scores continuations after the prompt: per continuation, the sum of its tokens' log-probabilities and how many
#: tokens it has.
Scorer = Callable[[Sequence[str]], list[tuple[float, int]]]


class LikelihoodChoiceError(ValueError):
    """The subtasks cannot be enumerated (no grounded target names)."""


@dataclass(frozen=True)
class ScoredAnswer:
    """The chosen answer and what was scored to choose it."""

    text: str
    subtask_logprob: float  # the mean per token of the chosen line
    lines_scored: int


def _means(score: Scorer, texts: Sequence[str]) -> list[float]:
    return [total / count for total, count in score(texts)]


def _line(action: str, *targets: str) -> str:
    return SUBTASK_HEAD + ", ".join([action, *targets]) + "]"


def choose_answer(score: Scorer, constraint: AnswerConstraint, put_beam: int = PUT_BEAM) -> ScoredAnswer:
    """The most likely subtask line of ``constraint`` and its most likely Model line (module docstring)."""
    if not constraint.targets and any(max(subtask_arities(a)) > 0 for a in constraint.actions):
        raise LikelihoodChoiceError("the likelihood choice needs grounded target names (the grammar's free-form "
                                    "target cannot be enumerated)")
    lines: list[str] = []
    two_target: list[str] = []
    for action in constraint.actions:
        arities = subtask_arities(action)
        if 0 in arities:
            lines.append(_line(action))
        if 1 in arities:
            lines.extend(_line(action, target) for target in constraint.targets)
        if 2 in arities:
            two_target.append(action)
    scored = 0
    for action in two_target:
        heads = [SUBTASK_HEAD + f"{action}, {target}," for target in constraint.targets]
        head_scores = _means(score, heads)
        scored += len(heads)
        best = sorted(range(len(heads)), key=lambda i: head_scores[i], reverse=True)[:put_beam]
        lines.extend(_line(action, constraint.targets[i], place)
                     for i in best for place in constraint.targets if place != constraint.targets[i])
    line_scores = _means(score, lines)
    scored += len(lines)
    winner = max(range(len(lines)), key=lambda i: line_scores[i])
    line = lines[winner]
    action = line[len(SUBTASK_HEAD):-1].split(",")[0].strip()
    models = constraint.models_for(action)
    if len(models) == 1:
        model = models[0]
    else:
        model_scores = _means(score, [line + MODEL_HEAD + m for m in models])
        model = models[max(range(len(models)), key=lambda i: model_scores[i])]
    return ScoredAnswer(line + MODEL_HEAD + model, line_scores[winner], scored)

"""The executor's feedback texts, word for word from EMMOE appendix E.1.

The planner models are trained on these strings, so they are kept exactly, including the paper's
grammar ("Can not", "the target is far away") and its lower-cased action word (the paper's executor
compares ``action`` with ``'pick'``, ``'open'`` ... and formats the same lower-cased word into the text).

Messages the paper does not define are marked "decision" and documented in ``docs/loop.md``.
"""

from __future__ import annotations

from homiebot.types import casefold_words

#: Success (appendix E.1: ``feedback = "None"``).
SUCCESS = "None"


def action_word(action: str) -> str:
    """The action as the paper's executor formats it: lower-case, single spaces (``"Go to"`` -> ``"go to"``)."""
    return casefold_words(action)


# ----------------------------------------------------------------------------- F: format errors (E.1)


def not_in_action_list(action: str) -> str:
    return f"{action_word(action)} is not in the action list! You should only choose actions in the list."


def does_not_exist(target: str) -> str:
    return f"{target} does not exist! Please choose another object"


# Decision: the paper lists "model not in the list" under F1 (section 3.3) without a message; this mirrors
# the action message so that a model trained on one recognises the other.
def not_in_model_list(model: str) -> str:
    return f"{model or 'None'} is not in the model list! You should only choose models in the list."


# Decision (strict model checking only): a listed model that does not serve the action.
def model_cannot(model: str, action: str) -> str:
    return f"{model} can not {action_word(action)}! You should choose a suitable model in the list."


# Decision: a subtask with no target (``[Pick]``) or a Put with no place is a format error (F1).
def missing_target(action: str) -> str:
    return f"{action_word(action)} needs a target! You should output in format [action, target]."


def missing_place(action: str = "Put") -> str:
    word = action_word(action)
    return f"{word} needs a place! You should output in format [{action.strip().capitalize()}, object, place]."


# ----------------------------------------------------------------------------- L: logical errors (E.1)


def hand_full(action: str) -> str:
    return f"Unable to {action_word(action)}, the hand is full"


def hand_empty(action: str) -> str:
    return f"Unable to {action_word(action)}, the hand is empty"


def container_closed(target: str) -> str:
    return f"Unable to put, the {target} is closed, you should open it first"


def not_interactive(action: str, target: str) -> str:
    return f"Can not {action_word(action)} {target}! Please choose another object"


# ----------------------------------------------------------------------------- D: distance errors (E.1)


def too_far(action: str) -> str:
    return f"Unable to {action_word(action)}, the target is far away"


def too_close(action: str) -> str:
    return f"Unable to {action_word(action)}, the target is too close"


# ----------------------------------------------------------------------------- E: execution errors (E.1)


def too_difficult(action: str) -> str:
    return f"Unable to {action_word(action)}, the subtask is too difficult to perform"


def object_missing(action: str) -> str:
    return f"Unable to {action_word(action)}, and the object is missing"


# ----------------------------------------------------------------------------- two agents (PARTNR; decisions)


# Decision: PARTNR's robot lacks the state-changing skills (appendix A.9.1); the paper's prompt says so, its
# executor never receives such a call. Ours answers F1 like an action outside the list, naming why.
def not_capable(agent: str, action: str) -> str:
    return f"the {agent} can not {action_word(action)}! Only the other agent can, you should choose another action."


# Decision: PARTNR's pick skill fails on an object the other agent holds; the message names the holder.
def held_by_other(action: str, target: str, holder: str) -> str:
    return f"Unable to {action_word(action)}, the {target} is held by the {holder}"

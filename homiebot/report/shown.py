"""How EMMOE's "nothing" values are shown to a person (the round tables, the episode page, the play screen).

EMMOE's text writes "nothing" as the word ``None`` (appendix D and E.1): the success feedback is ``"None"``,
an empty inventory is ``"None"``, and ``[End]`` (or PARTNR's ``[Wait]``) runs the model ``"None"``. The records
and the prompts keep these strings exactly (the planners are trained on them); a person reading a table or a
page sees them as a program's missing value ("feedback None", "model None"), so what is shown says what they
mean instead.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Shown where there is nothing to show (no model, no feedback text).
NOTHING = "-"
_NONE_WORDS = frozenset({"", "none"})


def is_nothing(text: str | None) -> bool:
    """True for a missing value and for EMMOE's word ``None``."""
    return text is None or text.strip().lower() in _NONE_WORDS


def shown_model(model: str | None) -> str:
    """The low-level model, or ``-`` when the round ran none (``[End]``, ``[Wait]``, an unparsed answer)."""
    return NOTHING if is_nothing(model) else str(model)


def shown_feedback(message: str | None, code: str = "OK") -> str:
    """The feedback text, or ``-`` for EMMOE's success text ``None`` (the code ``OK`` beside it says it)."""
    if is_nothing(message):
        return NOTHING if code == "OK" else code
    return str(message)


def shown_inventory(items: Iterable[str]) -> str:
    """``apple cup``, or ``nothing`` for an empty hand (EMMOE writes ``None``)."""
    names = [item for item in items if not is_nothing(item)]
    return " ".join(names) if names else "nothing"

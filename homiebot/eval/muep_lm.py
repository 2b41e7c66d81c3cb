"""A language model as a text agent of the MuEP-style suite (text mode: it reads ALFWorld's text, no images).

The input follows MuEP's test client for text-only models (MuEP section 4.2; docs/muep.md): one growing
string ``[STATE] {room sentence} {task sentence} [action] `` to which every step appends ``{command} [STATE]
{observation} [action] ``. The model (a bundled GGUF model, :mod:`homiebot.planner.text_lm`, e.g. SmolLM2)
answers with the next command, greedily; the first line of its answer is played as is, so an answer outside
the game's grammar is "Nothing happens." and counts against LC, as in MuEP. Unlike MuEP's models, ours are not
fine-tuned on ALFWorld, so the system turn explains the game and shows a short example (our own).

Observation modes (:class:`~homiebot.eval.muep_suite.Observe`): MuEP gives its multimodal models the image,
the task and their own past actions, no text observation. A text-only model cannot take pixels, so here it
reads the views as the names of what their instance segmentation shows (``[VIEW] In view: a apple 1, ...``,
:meth:`~homiebot.eval.muep_suite.MuepObservation.shown`). ``images``: the task, the commands played and the
views after each; ``both``: MuEP's text input with the views' sentence after every ``[STATE]``.
"""

from __future__ import annotations

from homiebot.eval.muep_suite import AlfredTask, MuepObservation, Observe
from homiebot.planner.messages import ChatMessage
from homiebot.planner.text_lm import TextLanguageModel, TextModelConfig
from homiebot.textworld.world import TextWorld, join_things

SYSTEM_PROMPT = (
    "You control a robot in a household text game. After [STATE] you read what the robot sees; after [action] "
    "you write exactly one command and nothing else. Commands: go to (place), take (object) from (place), "
    "move (object) to (place), open (place), close (place), heat (object) with (microwave), cool (object) with "
    "(fridge), clean (object) with (sinkbasin), use (lamp), examine (thing), inventory, look. Use the names "
    "with their numbers exactly as the game writes them. Example: to put an apple in the fridge you may write "
    "'go to countertop 1', then 'take apple 1 from countertop 1', then 'go to fridge 1', then "
    "'move apple 1 to fridge 1' (open the fridge first, with empty hands, if it is closed)."
)
#: Added to the system turn when the views are given (``images`` and ``both``).
VIEWS_NOTE = "After [VIEW] you read the things the robot's cameras show now."


def system_prompt(mode: Observe) -> str:
    return SYSTEM_PROMPT if not mode.with_images else f"{SYSTEM_PROMPT} {VIEWS_NOTE}"


def view_sentence(names: list[str]) -> str:
    """What the views show, in ALFWorld's list style: "In view: a apple 1, and a countertop 1."."""
    return f"In view: {join_things(names)}." if names else "In view: nothing."


class LanguageModelTextAgent:
    """MuEP's text-mode input to a bundled language model; one model serves every episode of a run."""

    def __init__(self, model: TextLanguageModel, name: str = "smollm2", max_new_tokens: int = 20) -> None:
        self.model = model
        self.name = name
        self.max_new_tokens = max_new_tokens
        self.prompt = ""
        self._last: str | None = None
        self._world: TextWorld | None = None
        self._mode = Observe.TEXT

    @classmethod
    def bundled(cls, name: str = "smollm2") -> LanguageModelTextAgent:
        from homiebot.planner.models import bundled_model

        model = bundled_model(name)
        if model is None:
            raise ValueError(f"no bundled model named {name!r}")
        return cls(TextLanguageModel(TextModelConfig(model)), name)

    def reset(self, task: AlfredTask, world: TextWorld | None, observation: MuepObservation) -> None:
        self._world = world
        self._mode = observation.mode
        if observation.text is not None:
            paragraphs = observation.text.split("\n\n")
            scene, goal = (paragraphs[1], paragraphs[2]) if len(paragraphs) >= 3 else (observation.text, "")
            state = f"[STATE] {scene} {goal}"
        else:  # images only: the task sentence, as MuEP's multimodal input
            state = f"[STATE] {observation.task}"
        self.prompt = f"{state}{self._views(observation)} [action] "
        self._last = None

    def _views(self, observation: MuepObservation) -> str:
        if observation.views is None or self._world is None:
            return ""
        return f" [VIEW] {view_sentence(observation.shown(self._world))}"

    def act(self, observation: MuepObservation, admissible: list[str]) -> str | None:
        if self._last is not None:
            state = f" [STATE] {observation.text}" if observation.text is not None else ""
            self.prompt += f"{self._last}{state}{self._views(observation)} [action] "
        conversation = [ChatMessage("system", system_prompt(self._mode)), ChatMessage("user", self.prompt)]
        answer = self.model.generate([conversation], max_new_tokens=self.max_new_tokens)[0].text
        lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
        command = (lines[0] if lines else "").strip(" .'\"`").lower()
        for marker in ("[state]", "[action]", "[view]"):
            command = command.split(marker)[0].strip()
        # An empty answer is played as it is: the game answers "Nothing happens." and MuEP's LC counts it as
        # non-compliant (it is no command of the game's grammar). Substituting "look" made it count as compliant.
        self._last = command
        return command

    def close(self) -> None:
        self.model.close()

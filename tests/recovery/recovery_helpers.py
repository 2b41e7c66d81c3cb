"""Helpers for the recovery tests: a scripted base planner, scripted stage answers, and requests with feedback."""

from __future__ import annotations

import json
from typing import Any

from homiebot.planner.base import PlanRequest
from homiebot.planner.prompt import parse_output
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.recovery.llm import ScriptedLLM
from homiebot.recovery.planner import RecoveryPlanner
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, EntityKind, EntityState, Pose2D, WorldState

TASK = "put the apple from the fridge on the table"


def answer(subtask: str, model: str = "RT-1-X") -> str:
    return f"Analysis: base planner\nSubtask: {subtask}\nModel: {model}"


def importance(important: bool, reason: str = "the task needs it") -> str:
    return json.dumps({"reason": reason, "important": important})


def steps_answer(steps: list[str], reason: str = "because", **extra: Any) -> str:
    return json.dumps({"reason": reason, **extra, "steps": steps})


def _entity(name: str, kind: EntityKind, **kw: Any) -> EntityState:
    return EntityState(name=name, category=name, kind=kind, aliases=(), position=(0.0, 0.0, 0.0),
                       bbox_min=(0.0, 0.0, 0.0), bbox_max=(0.1, 0.1, 0.1), **kw)


def kitchen_state(held: str | None = None) -> WorldState:
    entities = {
        "kitchen": _entity("kitchen", EntityKind.ROOM),
        "fridge": _entity("fridge", EntityKind.FURNITURE, articulated=True, interactive=True, is_open=False, room="kitchen"),
        "table": _entity("table", EntityKind.FURNITURE, room="kitchen"),
        "apple": _entity("apple", EntityKind.OBJECT, parent="fridge", relation="in", room="kitchen"),
        "cup": _entity("cup", EntityKind.OBJECT, parent="table", relation="on", room="kitchen", held=held == "cup"),
    }
    if held == "cup":
        entities["cup"] = _entity("cup", EntityKind.OBJECT, held=True)
    return WorldState(robot=Pose2D(0, 0, 0), robot_radius=0.3, held=held, entities=entities, scene="kitchen",
                      robot_room="kitchen")


def request(feedback: str = "None", *, state: WorldState | None = None, goal: Any = None, round_index: int = 1,
            grounded: tuple[str, ...] = (), description: str | None = None) -> PlanRequest:
    return PlanRequest(system_prompt="sys", instruction="instr", images=[], task=TASK, round_index=round_index,
                       feedback=feedback, actions=EMMOE_ACTIONS, models=EMMOE_MODELS,
                       world_state=state if state is not None else kitchen_state(), goal=goal,
                       grounded_targets=grounded, world_description=description)


class Driver:
    """Runs a wrapper round by round, feeding it the feedback of each answered subtask."""

    def __init__(self, base_answers: list[str], llm_answers: list[str], **options: Any) -> None:
        self.base = ScriptedPlanner(base_answers)
        self.llm = ScriptedLLM(list(llm_answers), default='{"reason": "none", "steps": []}')
        options.setdefault("search", False)
        self.planner = RecoveryPlanner(self.base, llm=self.llm, **options)
        self.planner.reset(TASK, seed=7)
        self.round = 0
        self.subtasks: list[str] = []

    def step(self, feedback: str = "None", **kw: Any) -> str:
        """Answer one round given last round's feedback message; returns the bracketed subtask."""
        self.round += 1
        raw = self.planner.plan(request(feedback, round_index=self.round, **kw))
        output = parse_output(raw)
        assert output.subtask is not None, raw
        text = output.subtask.text()
        self.subtasks.append(text)
        return text


class FakeChatServer:
    """An OpenAI-compatible chat-completions endpoint on 127.0.0.1 that answers from a script: the base planner's
    requests get ``base_answers`` in order (then ``[End]``), a recovery stage's request the answer ``stages`` gives
    for that stage (recognised by the JSON form its prompt asks for). Not a model: it stands in for one where a
    test runs the real planners, the wrapper and the graph over HTTP. ``requests`` keeps what each call was."""

    #: A fragment of each stage prompt's answer form (homiebot.recovery.prompts) -> the stage's name.
    STAGE_FORMS = {
        '"important": true or false': "importance",
        '"missing": true or false': "preconditions",
        "No missing condition explains": "workaround",
        "has finished its plan": "post_execution",
        "has not seen it yet": "search",
        '"locations": [[': "locations",
        '"action": "skip" or': "cot",
    }

    def __init__(self, base_answers: list[str], stages: dict[str, str]) -> None:
        from homiebot.testing.openai_server import FakeOpenAIServer

        self.base_answers = list(base_answers)
        self.stages = dict(stages)
        self.requests: list[str] = []  # "base" or a stage's name, in order
        self._server = FakeOpenAIServer(lambda body: self.answer(body.get("messages", [])))
        self.url = self._server.url

    def answer(self, messages: list[dict[str, Any]]) -> str:
        last = messages[-1]["content"] if messages else ""
        last = last if isinstance(last, str) else " ".join(str(p.get("text", "")) for p in last)
        for fragment, stage in self.STAGE_FORMS.items():
            if fragment in last:
                self.requests.append(stage)
                return self.stages.get(stage, '{"reason": "nothing", "steps": []}')
        self.requests.append("base")
        if self.base_answers:
            return self.base_answers.pop(0)
        return answer("[End]", "NoMaD")

    def close(self) -> None:
        self._server.close()

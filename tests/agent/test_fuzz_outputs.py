"""Fuzz: 10,000 random and mutated planner outputs through the real loop (session + parser + executor).

What is asserted, for every one of the 10,000 rounds:

1. nothing raises, and the episode carries no infrastructure error;
2. the feedback is an EMMOE code with a non-empty message;
3. the F family is exactly the malformed outputs, checked independently of the executor:
   * F1 with the format message  <=> the answer does not parse;
   * F1 (other messages)          <=> it parses but the action is not in the list, or the model is not in
     the list, or the target / place is missing;
   * F2                           <=> all that is fine but the target or the place names nothing in the scene;
   * anything else (L1-L4, D1, D2, E1, E2, OK) only for a well-formed subtask whose names all ground.
"""

from __future__ import annotations

import random
import string

from homiebot.agent.loop import EpisodeConfig, run_episode
from homiebot.agent.session import FORMAT_ERROR_MESSAGE
from homiebot.perception.grounding import AliasGrounder
from homiebot.planner.prompt import parse_output
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.testing.fake_world import FakeWorld, kitchen_world
from homiebot.types import EMMOE_ACTIONS, EMMOE_MODELS, Action, ErrorCode

TOTAL = 10_000
WORDS = [
    "fridge", "the fridge", "refrigerator", "green_can", "short_can", "can", "apple", "brown_table", "table",
    "kitchen_drawer", "drawer", "kitchen", "living room", "blue_sofa", "sofa", "kitchen_counter", "item",
    "stack of papers", "Fridge", "GREEN_CAN", "", " ", "banana", "[", "]", ",", "None", "blender", "pickle_jar",
    "日本", "\n", "\t", "apple, fridge", "0", "-1",
]
ACTIONS = list(EMMOE_ACTIONS) + ["go to", "PICK", "Wash", "Turn on", "Goto", "", "Navigate", "end", "open ", "Put down"]
MODELS = list(EMMOE_MODELS) + ["octo", "Octo", "rt-1-x", "GPT-4o", "", "None", "NoMaD PixNav", "M3"]


def valid_like(rng: random.Random) -> str:
    action = rng.choice(ACTIONS)
    parts = [action] + [rng.choice(WORDS) for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))]
    return f"Analysis: {rng.choice(WORDS)} because.\nSubtask: [{', '.join(parts)}]\nModel: {rng.choice(MODELS)}"


def mutate(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(7)
        pos = rng.randrange(len(chars) + 1)
        if op == 0 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op == 1:
            chars.insert(pos, rng.choice(string.printable + "[]:,\u00e9\u4e2d"))
        elif op == 2 and len(chars) > 1:
            i, j = rng.randrange(len(chars)), rng.randrange(len(chars))
            chars[i], chars[j] = chars[j], chars[i]
        elif op == 3:
            chars = list("".join(chars).upper() if rng.random() < 0.5 else "".join(chars).lower())
        elif op == 4:
            lines = "".join(chars).split("\n")
            rng.shuffle(lines)
            chars = list("\n".join(lines))
        elif op == 5:
            chars = list("".join(chars).replace(rng.choice(["[", "]", "Analysis:", "Subtask:", "Model:", ","]), ""))
        else:
            chars[pos:pos] = list(rng.choice(WORDS))
    return "".join(chars)


def random_text(rng: random.Random) -> str:
    alphabet = string.printable + "\u00e9\u4e2d\U0001F600"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))


def outputs(rng: random.Random):
    while True:
        kind = rng.random()
        if kind < 0.45:
            yield valid_like(rng)
        elif kind < 0.9:
            yield mutate(valid_like(rng), rng)
        else:
            yield random_text(rng)


def expected_family(raw: str, initial_state) -> str:
    """Independent classification: 'parse', 'F1', 'F2' or 'checked' (well-formed and grounded)."""
    out = parse_output(raw)
    if out.subtask is None:
        return "parse"
    action = Action.parse(out.subtask.action)
    if action is None or action.value not in EMMOE_ACTIONS:  # the household actions are not in EMMOE's list
        return "F1"
    if action is Action.END:
        return "end"
    if out.model.strip().lower() not in {m.lower() for m in EMMOE_MODELS}:
        return "F1"
    target = (out.subtask.target or "").strip()
    place = (out.subtask.place or "").strip()
    if not target or (action is Action.PUT and not place):
        return "F1"
    grounder = AliasGrounder()
    names = [target] + ([place] if action is Action.PUT else [])
    if any(grounder.ground(n, initial_state).instance is None for n in names):
        return "F2"
    return "checked"


def test_ten_thousand_fuzzed_outputs():
    rng = random.Random(20240601)
    stream = outputs(rng)
    initial = FakeWorld(kitchen_world()).state()
    seen = 0
    families: dict[str, int] = {}
    config = EpisodeConfig(render=False)
    while seen < TOTAL:
        script = [next(stream) for _ in range(20)]
        world = FakeWorld(kitchen_world())
        traj = run_episode(world, ScriptedPlanner(script, on_exhausted="error"), instruction="fuzz", scene="fake",
                           config=config)
        assert traj.error is None
        for record in traj.rounds:
            seen += 1
            fb = record.feedback
            assert isinstance(fb.code, ErrorCode) and fb.message
            family = expected_family(record.output.raw, initial)
            families[family] = families.get(family, 0) + 1
            if family == "parse":
                assert (fb.code, fb.message) == (ErrorCode.F1, FORMAT_ERROR_MESSAGE), record.output.raw
            elif family == "F1":
                assert fb.code is ErrorCode.F1 and fb.message != FORMAT_ERROR_MESSAGE, (record.output.raw, fb)
            elif family == "F2":
                assert fb.code is ErrorCode.F2 and fb.message.endswith("does not exist! Please choose another object")
            elif family == "end":
                assert fb.code is ErrorCode.OK
            else:
                assert fb.code.family in ("L", "D", "E", "OK"), (record.output.raw, fb)
    # The generator must exercise every branch, or the test proves little.
    assert all(families.get(k, 0) > 200 for k in ("parse", "F1", "F2", "checked")), families

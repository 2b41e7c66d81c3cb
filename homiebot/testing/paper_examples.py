"""Appendix C's worked examples as trajectories (shared by the metric tests).

Each step is written as in the paper, ``"[Go to, kitchen]"`` plus its success flag; :func:`trajectory`
turns them into the :class:`~homiebot.types.Trajectory` the loop would return, with EMMOE feedback codes
(failed puts are E1 here: the example does not say which error occurred, and TP, SER and SRR do not care).
"""

from __future__ import annotations

from pathlib import Path

from homiebot.eval.keypaths import SceneNameResolver
from homiebot.planner.prompt import format_output, split_subtask
from homiebot.types import ErrorCode, Feedback, PlannerOutput, RoundRecord, Trajectory

#: EMMOE's full name map (a copy ships with the perception package; tests fall back to the excerpt below).
NAME_DICT = Path(__file__).resolve().parents[2] / "homiebot" / "perception" / "data" / "emmoe_name_dict.txt"

#: The entries of EMMOE's name map that appendix C's examples touch, in the map's own format.
NAME_DICT_EXCERPT = """002_master_chef_can:
blue can/blue_can/can/master_chef_can/master chef can/meat_can/meat can

004_sugar_box:
yellow_box/yellow box/box/sugar_box/sugar box/suger_box

005_tomato_soup_can:
red_can/red can/can/soup_can/soup can/tomato_soup_can/tomato soup can

007_tuna_fish_can:
fish_can/fish can/can/short_can/short can/meat_can/meat can/tuna_fish_can/tuna fish can

frl_apartment_refrigerator:
fridge/refrigerator

fridge:
fridge/refrigerator

kitchen_counter:
kitchen_counter/kitchen counter/sink/kitchen_sink/kitchen sink/drawer/kitchen_drawer/kitchen drawer/kitchen/kitchen countertop/kitchen area
"""

#: Appendix C.1: the keypaths of the appendix B task ("put the short can into the drawer").
C1_KEYPATHS = [
    ["[Open, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[End]"],
    ["[Open, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[Close, drawer]", "[End]"],
    ["[Go to, drawer]", "[Open, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[End]"],
    ["[Go to, drawer]", "[Open, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[Close, drawer]", "[End]"],
]

#: Appendix C.1: the 20-step run whose TP is max(1/3, 1/4, 1/2, 2/5) = 0.5.
C1_STEPS: list[tuple[str, bool]] = [
    ("[Go to, kitchen]", True),
    ("[Open, drawer]", True),
    ("[Put, short_can, drawer]", False),
    ("[Go to, kitchen_counter]", True),
    ("[Put, short_can, kitchen_counter]", False),
    ("[Go to, drawer]", True),
    ("[Put, short_can, drawer]", False),
    ("[Go to, kitchen_counter]", True),
    ("[Put, short_can, kitchen_counter]", False),
    ("[Go to, drawer]", True),
    ("[Put, short_can, drawer]", False),
    ("[Go to, kitchen_counter]", True),
    ("[Put, short_can, kitchen_counter]", False),
    ("[Go to, drawer]", True),
    ("[Put, short_can, drawer]", False),
    ("[Go to, kitchen_counter]", True),
    ("[Put, short_can, kitchen_counter]", False),
    ("[Go to, drawer]", True),
    ("[Put, short_can, drawer]", False),
    ("[Go to, kitchen_counter]", True),
]

#: Appendix C.2: "take a yellow box and put it into the fridge", 16 steps ending in End, a success.
C2_STEPS: list[tuple[str, bool]] = [
    ("[Go to, kitchen_counter]", True),
    ("[Go to, yellow_box]", True),
    ("[Pick, yellow_box]", True),
    ("[Go to, fridge]", True),
    ("[Put, yellow_box, fridge]", False),
    ("[Open, fridge]", False),
    ("[Go to, kitchen_counter]", True),
    ("[Put, yellow_box, kitchen_counter]", True),
    ("[Go to, fridge]", True),
    ("[Open, fridge]", True),
    ("[Go to, kitchen_counter]", True),
    ("[Pick, yellow_box]", True),
    ("[Go to, fridge]", True),
    ("[Put, yellow_box, fridge]", True),
    ("[Close, fridge]", True),
    ("[End]", True),
]
#: A keypath for C.2's task (the paper says "we can judge by its keypath"; it does not print one).
C2_KEYPATHS = [
    ["[Open, fridge]", "[Pick, yellow_box]", "[Put, yellow_box, fridge]", "[End]"],
    ["[Open, fridge]", "[Pick, yellow_box]", "[Put, yellow_box, fridge]", "[Close, fridge]", "[End]"],
]


def emmoe_resolver(full: bool = False) -> SceneNameResolver:
    """The resolver over EMMOE's name map: the excerpt, or the whole shared file with ``full=True``."""
    return SceneNameResolver.from_emmoe_name_dict(NAME_DICT.read_text() if full else NAME_DICT_EXCERPT)


def trajectory(
    steps: list[tuple[str, bool]],
    *,
    task_id: str = "emmoe-example",
    failure_code: ErrorCode = ErrorCode.E1,
    goal_satisfied: bool | None = None,
    seed: int = 0,
) -> Trajectory:
    rounds = []
    for index, (text, ok) in enumerate(steps, start=1):
        subtask = split_subtask(text)
        model = "" if subtask.is_end else "NoMaD"
        output = PlannerOutput(raw=format_output("-", subtask, model), analysis="-", subtask=subtask, model=model)
        feedback = (
            Feedback(ErrorCode.OK, "None", attempts=1)
            if ok
            else Feedback(failure_code, "failed", attempts=3 if failure_code is ErrorCode.E1 else 1)
        )
        rounds.append(RoundRecord(index=index, instruction="", output=output, feedback=feedback))
    ended = bool(rounds) and rounds[-1].output.subtask is not None and rounds[-1].output.subtask.is_end
    return Trajectory(
        task_id=task_id,
        instruction="",
        scene="example",
        seed=seed,
        planner="example",
        rounds=rounds,
        ended=ended,
        goal_satisfied=goal_satisfied,
    )

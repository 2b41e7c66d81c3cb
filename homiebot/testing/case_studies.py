"""EMMOE appendix I, case 1 (HomieBot DPO, successful trajectory), as planner answers and expected feedback.

The paper shows each round's Analysis, Subtask, the inventory after the round and the round's feedback;
it does not show the model choices, so the EMMOE table E2 choice is filled in.
"""

from __future__ import annotations

CASE1_TASK = "put the green_can on the brown_table to the fridge"

#: (analysis, subtask, model, inventory after the round, feedback) per round, from appendix I.
CASE1_ROUNDS: list[tuple[str, str, str, str, str]] = [
    ("According to my final task, I need to go to the green_can first.",
     "[Go to, green_can]", "PixNav", "None", "None"),
    ("I successfully arrived the green_can and I should pick it next",
     "[Pick, green_can]", "RT-1-X", "green_can", "None"),
    ("I successfully picked the green_can, so according to my final task, I should go to the fridge to put it down.",
     "[Go to, fridge]", "NoMaD", "green_can", "None"),
    ("I successfully arrived the fridge and I should put the green_can into it next",
     "[Put, green_can, fridge]", "RT-1-X", "green_can", "Unable to put, the fridge is closed, you should open it first"),
    ("I failed to put the green_can into the fridge, since the fridge is closed, so I should open the fridge first",
     "[Open, fridge]", "octo", "green_can", "Unable to open, the hand is full"),
    ("I failed to open the fridge because my hand is full, so I should put the green_can on the brown_table first",
     "[Go to, brown_table]", "NoMaD", "green_can", "None"),
    ("I successfully arrive the brown_table and I should put the green_can on it",
     "[Put, green_can, brown_table]", "RT-1-X", "None", "None"),
    ("I successfully put the green_can on the brown_table, so I should go to the fridge next",
     "[Go to, fridge]", "NoMaD", "None", "None"),
    ("I successfully arrived the fridge and I should open it next",
     "[Open, fridge]", "octo", "None", "None"),
    ("I successfully open the fridge and find the green_can, so I should go to the green_can.",
     "[Go to, green_can]", "PixNav", "None", "None"),
    ("I successfully arrive the green_can and find it, so I should pick it.",
     "[Pick, green_can]", "RT-1-X", "green_can", "None"),
    ("I successfully picked the green_can, so according to my final task, I should go to the fridge to put it down.",
     "[Go to, fridge]", "NoMaD", "green_can", "None"),
    ("I successfully arrived the fridge and I should put the green_can into it next",
     "[Put, green_can, fridge]", "RT-1-X", "None", "None"),
    ("I successfully put the green_can into the fridge, so I should close the fridge next",
     "[Close, fridge]", "octo", "None", "None"),
    ("According to the historical execution and final task, I have finally finished the task and its time to end",
     "[End]", "None", "None", "None"),
]


def case1_outputs() -> list[str]:
    return [f"Analysis: {a}\nSubtask: {s}\nModel: {m}" for a, s, m, _, _ in CASE1_ROUNDS]

"""The ``paper`` prompt format reproduces EMMOE's printed samples byte for byte (EMMOE paper, appendices F.1, F.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homiebot.training.emmoe import PAPER_SUFFIX, augment, convert_info, info_text, paper_steps, sift
from homiebot.training.episodes import EpisodeData, RoundData
from homiebot.types import Subtask

# Task 21's subtasks as appendix F.1's samples show them in the history (1)-(13), then End.
TASK21 = [
    ("Go to", "blue_sofa", None, "PixNav"),
    ("Pick", "cracker_box", None, "RT-1-X"),
    ("Go to", "kitchen_counter", None, "NoMaD"),
    ("Put", "cracker_box", "kitchen_counter", "RT-1-X"),
    ("Go to", "blue_sofa", None, "PixNav"),
    ("Pick", "sugar_box", None, "RT-1-X"),
    ("Go to", "kitchen_counter", None, "NoMaD"),
    ("Put", "sugar_box", "kitchen_counter", "RT-1-X"),
    ("Go to", "blue_sofa", None, "PixNav"),
    ("Pick", "soup_can", None, "RT-1-X"),
    ("Go to", "kitchen_counter", None, "NoMaD"),
    ("Put", "soup_can", "kitchen_counter", "RT-1-X"),
    ("Go to", "blue_sofa", None, "PixNav"),
]
ANALYSIS_13 = (
    "I successfully put the soup_can on the kitchen_counter, according to my task, I should go back to the sofa to "
    "check whether its clean or not"
)
ANALYSIS_END = (
    "According to the historical execution and final task, I have finally finished the task and its time to end"
)

# Appendix F.1's sample, verbatim (the image paths are the paper's save_dir).
PAPER_SAMPLE_14 = json.loads(r"""{
  "id": "21_info_subtask14",
  "image": ["./HomieBot/data/train/21/subtask14_front.png", "./HomieBot/data/train/21/subtask14_left.png",
            "./HomieBot/data/train/21/subtask14_back.png", "./HomieBot/data/train/21/subtask14_right.png"],
  "conversations": [
    {"from": "human",
     "value": "Task: clean up the blue sofa\nInventory: None\nHistorical Execution:(1)[Go to, blue_sofa] (PixNav) (success)\n(2)[Pick, cracker_box] (RT-1-X) (success)\n(3)[Go to, kitchen_counter] (NoMaD) (success)\n(4)[Put, cracker_box, kitchen_counter] (RT-1-X) (success)\n(5)[Go to, blue_sofa] (PixNav) (success)\n(6)[Pick, sugar_box] (RT-1-X) (success)\n(7)[Go to, kitchen_counter] (NoMaD) (success)\n(8)[Put, sugar_box, kitchen_counter] (RT-1-X) (success)\n(9)[Go to, blue_sofa] (PixNav) (success)\n(10)[Pick, soup_can] (RT-1-X) (success)\n(11)[Go to, kitchen_counter] (NoMaD) (success)\n(12)[Put, soup_can, kitchen_counter] (RT-1-X) (success)\n(13)[Go to, blue_sofa] (PixNav) (success)\n\nFeedback: None\nNow, please output Analysis, Subtask and Model, according to the instruction above."},
    {"from": "gpt",
     "value": "Analysis: According to the historical execution and final task, I have finally finished the task and its time to end\nSubtask: [End]\nModel: None"}
  ]
}""")
PAPER_HUMAN_13 = (
    "Task: clean up the blue sofa\nInventory: None\nHistorical Execution:(1)[Go to, blue_sofa] (PixNav) (success)\n"
    "(2)[Pick, cracker_box] (RT-1-X) (success)\n(3)[Go to, kitchen_counter] (NoMaD) (success)\n"
    "(4)[Put, cracker_box, kitchen_counter] (RT-1-X) (success)\n(5)[Go to, blue_sofa] (PixNav) (success)\n"
    "(6)[Pick, sugar_box] (RT-1-X) (success)\n(7)[Go to, kitchen_counter] (NoMaD) (success)\n"
    "(8)[Put, sugar_box, kitchen_counter] (RT-1-X) (success)\n(9)[Go to, blue_sofa] (PixNav) (success)\n"
    "(10)[Pick, soup_can] (RT-1-X) (success)\n(11)[Go to, kitchen_counter] (NoMaD) (success)\n"
    "(12)[Put, soup_can, kitchen_counter] (RT-1-X) (success)\n\nFeedback: None\n"
    "Now, please output Analysis, Subtask and Model, according to the instruction above."
)
PAPER_GPT_13 = f"Analysis: {ANALYSIS_13}\nSubtask: [Go to, blue_sofa]\nModel: PixNav"


def _round(
    index: int,
    action: str,
    target: str | None,
    place: str | None,
    model: str,
    analysis: str,
    inventory: tuple[str, ...],
) -> RoundData:
    return RoundData(
        index=index,
        instruction="",
        raw_output="",
        analysis=analysis,
        subtask=Subtask(action, target, place),
        model=model,
        error_code="OK",
        feedback="None",
        inventory_before=(),
        inventory=inventory,
        images=(),
    )


def task21_episode() -> EpisodeData:
    rounds = []
    for i, (action, target, place, model) in enumerate(TASK21, 1):
        holding = (target,) if action == "Pick" and target else ()
        analysis = ANALYSIS_13 if i == 13 else f"analysis of subtask {i}"
        rounds.append(_round(i, action, target, place, model, analysis, holding))
    rounds.append(_round(14, "End", None, None, "None", ANALYSIS_END, ()))
    return EpisodeData(
        key="21",
        task_id="21",
        instruction="clean up the blue sofa",
        split="train",
        success=True,
        system_prompt="",
        rounds=tuple(rounds),
        directory=Path("."),
    )


def test_info_txt_is_the_raw_layout_of_appendix_b3():
    text = info_text(task21_episode())
    blocks = text.rstrip("\n").split("\n\n")
    assert blocks[0] == "Task: clean up the blue sofa"
    assert (
        blocks[2]
        == "Subtask2: [Pick, cracker_box] (RT-1-X)\nAnalysis: analysis of subtask 2\nFeedback: None\nInventory: cracker_box"
    )
    assert blocks[14] == f"Subtask14: [End]\nAnalysis: {ANALYSIS_END}\nFeedback: None\nInventory: None"


def test_paper_conversion_reproduces_appendix_f1_samples_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save_dir = "./HomieBot/data/train/21"
    Path(save_dir).mkdir(parents=True)
    for n in range(1, 15):
        for view in ("front", "left", "back", "right"):
            (Path(save_dir) / f"subtask{n}_{view}.png").write_bytes(b"png")
    samples = convert_info(info_text(task21_episode()), "21_info", save_dir)
    assert samples[13] == PAPER_SAMPLE_14
    assert samples[12]["id"] == "21_info_subtask13"
    assert samples[12]["conversations"][0]["value"] == PAPER_HUMAN_13
    assert samples[12]["conversations"][1]["value"] == PAPER_GPT_13
    assert json.dumps(samples[13]) == json.dumps(PAPER_SAMPLE_14)  # key order too


def test_paper_conversion_refuses_missing_images_like_the_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="File does NOT exist"):
        convert_info(info_text(task21_episode()), "21_info", str(tmp_path))


def test_paper_dpo_sample_format_equals_appendix_f2():
    """Appendix F.2's third printed pair (a model change on the first subtask of 'find a blue can for me')."""
    rounds = (
        _round(1, "Go to", "fridge", None, "PixNav", "the can may be in the fridge, so I should go there", ()),
        _round(2, "End", None, None, "None", ANALYSIS_END, ()),
    )
    episode = EpisodeData(
        key="7",
        task_id="7",
        instruction="find a blue can for me",
        split="train",
        success=True,
        system_prompt="",
        rounds=rounds,
        directory=Path("."),
    )
    steps = paper_steps(episode, "7_info", None)
    pairs, _ = augment(sift(steps).sft)
    model_change = next(p for p in pairs if p.kind == "model_change")
    printed = {
        "prompt": "Task: find a blue can for me\nInventory: None\nHistorical Execution: None\nFeedback: None\n"
        "Now, please output Analysis, Subtask and Model, according to the instruction above.",
        "chosen": "Subtask: [Go to, fridge]\nModel: PixNav",
        "rejected": "Subtask: [Go to, fridge]\nModel: NoMaD",
    }
    assert {
        "prompt": model_change.step.prompt,
        "chosen": model_change.chosen,
        "rejected": model_change.rejected,
    } == printed
    # The only order change of this episode has End as the rejected answer (End is never chosen).
    order = next(p for p in pairs if p.kind == "order_change")
    assert order.rejected == "Subtask: [End]\nModel: None"
    assert all("[End]" not in p.chosen for p in pairs)
    assert printed["prompt"].endswith(PAPER_SUFFIX)

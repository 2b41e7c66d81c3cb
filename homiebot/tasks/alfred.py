"""ALFWorld's task types as MuEP's suite uses them: the six types in MuEP's table order, their column labels and
ALFRED's goal-condition counts. The suite file and its runner are :mod:`homiebot.eval.muep_suite`; the text world's
ALFWorld export (:mod:`homiebot.textworld.alfworld`) checks a game's type against the same list."""

from __future__ import annotations

#: ALFWorld's six task types (``alfred_tw_env.TASK_TYPES``), in MuEP's table order.
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
#: MuEP's column names for them.
TYPE_LABELS: dict[str, str] = {
    "pick_and_place_simple": "Pick & place",
    "look_at_obj_in_light": "Examine in light",
    "pick_clean_then_place_in_recep": "Clean & place",
    "pick_heat_then_place_in_recep": "Heat & place",
    "pick_cool_then_place_in_recep": "Cool & place",
    "pick_two_obj_and_place": "Pick two & place",
}
#: ALFRED's goal-condition counts per type (alfworld ``env/tasks.py``), which MuEP's GCS uses.
GOAL_CONDITIONS: dict[str, int] = {
    "pick_and_place_simple": 1,
    "look_at_obj_in_light": 2,
    "pick_clean_then_place_in_recep": 3,
    "pick_heat_then_place_in_recep": 3,
    "pick_cool_then_place_in_recep": 3,
    "pick_two_obj_and_place": 2,
}

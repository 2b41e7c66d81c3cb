"""Keypath parsing, name resolution and appendix C.1's TP example (TP = 0.5 from 1/3, 1/4, 1/2, 2/5)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from homiebot.eval.keypaths import (
    KeypathError,
    Node,
    SceneNameResolver,
    Step,
    matched_prefix,
    parse_keypath,
    parse_node,
    task_progress,
)
from homiebot.testing.paper_examples import (
    C1_KEYPATHS,
    C1_STEPS,
    C2_KEYPATHS,
    C2_STEPS,
    NAME_DICT,
    emmoe_resolver,
    trajectory,
)


def test_parse_node_canonicalises_the_action() -> None:
    assert parse_node("[Put, short_can, kitchen_drawer]") == Node("Put", ("short_can", "kitchen_drawer"))
    assert parse_node(" [go  TO, fridge] ") == Node("Go to", ("fridge",))
    assert parse_node("[End]").is_end


@pytest.mark.parametrize("bad", ["Go to, fridge", "[]", "[, fridge]", "[Put, can, ]"])
def test_parse_node_rejects_malformed_nodes(bad: str) -> None:
    with pytest.raises(KeypathError):
        parse_node(bad)


def test_emmoe_name_dict_aliases() -> None:
    resolver = emmoe_resolver()
    # The reason "[Go to, kitchen]" checks "[Go to, drawer]" in appendix C.1: both name the kitchen counter.
    assert resolver.resolve("kitchen") == resolver.resolve("drawer") == {"kitchen_counter"}
    assert resolver.resolve("Kitchen Drawer") == {"kitchen_counter"}
    assert resolver.resolve("short_can") == {"007_tuna_fish_can"}
    assert resolver.resolve("yellow_box") == {"004_sugar_box"}
    assert resolver.resolve("unicorn") == frozenset()
    # "can" is a category word shared by several instances.
    assert {"002_master_chef_can", "005_tomato_soup_can"} <= resolver.resolve("can")


@pytest.mark.parametrize("full", [False, True], ids=["excerpt", "full-name-dict"])
def test_appendix_c1_task_progress_is_one_half(full: bool) -> None:
    if full and not NAME_DICT.exists():
        pytest.skip(f"EMMOE's full name map is not in this checkout ({NAME_DICT})")
    progress = task_progress(C1_KEYPATHS, trajectory(C1_STEPS).rounds, emmoe_resolver(full))
    assert len(C1_STEPS) == 20
    assert progress.per_keypath == (Fraction(1, 3), Fraction(1, 4), Fraction(1, 2), Fraction(2, 5))
    assert progress.value == Fraction(1, 2)
    assert progress.best_keypath == 2
    assert not progress.complete


def test_appendix_c2_trajectory_completes_its_keypath() -> None:
    progress = task_progress(C2_KEYPATHS, trajectory(C2_STEPS).rounds, emmoe_resolver())
    assert progress.value == 1 and progress.complete


def test_without_aliases_kitchen_does_not_check_drawer() -> None:
    # The same example with a scene that does not alias "kitchen" to the counter: keypath 3 loses its first node.
    resolver = SceneNameResolver.from_entities(
        [("kitchen_counter", "counter", ["drawer", "kitchen_drawer"]), ("can_1", "can", ["short_can"])]
    )
    progress = task_progress(C1_KEYPATHS, trajectory(C1_STEPS).rounds, resolver)
    # [Go to, kitchen] no longer matches; "[Go to, kitchen_counter]" (step 4) checks "[Go to, drawer]" after the
    # only Open, so keypaths 3 and 4 stop at their first node.
    assert progress.per_keypath == (Fraction(1, 3), Fraction(1, 4), Fraction(1, 4), Fraction(1, 5))


def test_only_successful_steps_match_and_order_is_strict() -> None:
    resolver = emmoe_resolver()
    path = parse_keypath(["[Open, fridge]", "[Put, apple, fridge]", "[End]"])
    put, opened, end = (parse_node(t) for t in ("[Put, apple, fridge]", "[Open, fridge]", "[End]"))
    # A failed Open does not check the node.
    assert matched_prefix(path, [Step(opened, False), Step(put, True), Step(end, True)], resolver) == 0
    # Put before Open: the Put cannot check node 2 before node 1 is checked, and is not revisited.
    assert matched_prefix(path, [Step(put, True), Step(opened, True), Step(end, True)], resolver) == 1
    assert matched_prefix(path, [Step(opened, True), Step(put, True), Step(end, True)], resolver) == 3
    # An unparseable round (node None) never matches.
    assert matched_prefix(path, [Step(None, True), Step(opened, True)], resolver) == 1


def test_category_words_match_instances_of_the_category() -> None:
    resolver = SceneNameResolver.from_entities(
        [("apple_1", "apple", []), ("apple_2", "apple", ["red_apple"]), ("pear_1", "pear", []), ("fridge", "fridge", [])],
        groups={"fruit": ["apple", "pear"]},
    )
    node = parse_node("[Pick, apple]")
    assert matched_prefix((node,), [Step(parse_node("[Pick, apple_2]"), True)], resolver) == 1
    assert matched_prefix((node,), [Step(parse_node("[Pick, red_apple]"), True)], resolver) == 1
    assert matched_prefix((node,), [Step(parse_node("[Pick, pear_1]"), True)], resolver) == 0
    # Two different instances of the same category are different things.
    assert matched_prefix((parse_node("[Pick, apple_1]"),), [Step(parse_node("[Pick, apple_2]"), True)], resolver) == 0
    # A group word covers its member categories.
    assert matched_prefix((parse_node("[Pick, fruit]"),), [Step(parse_node("[Pick, pear_1]"), True)], resolver) == 1
    # Unknown words match only themselves; argument counts must agree.
    assert matched_prefix((parse_node("[Go to, attic]"),), [Step(parse_node("[Go to, Attic]"), True)], resolver) == 1
    assert matched_prefix((parse_node("[Put, apple, fridge]"),), [Step(parse_node("[Put, apple]"), True)], resolver) == 0


def test_end_output_matches_end_node_whatever_its_feedback() -> None:
    from homiebot.types import ErrorCode

    traj = trajectory([("[End]", False)], failure_code=ErrorCode.F1)
    assert task_progress([["[End]"]], traj.rounds, emmoe_resolver()).value == 1


def test_task_progress_needs_keypaths() -> None:
    with pytest.raises(KeypathError):
        task_progress([], [], emmoe_resolver())


def test_rounds_grounded_through_a_world_graph_are_read_as_grounded() -> None:
    """With perception the planner speaks the graph's names ("fridge_1"), which the scene's table does not know;
    TP then reads the subtask the executor grounded (simulator instances), recorded per round."""
    from homiebot.types import ErrorCode, Feedback, PlannerOutput, RoundRecord, Subtask

    resolver = SceneNameResolver.from_entities([("meat_can", "meat_can", ["tuna can"]), ("fridge", "fridge", [])])

    def round_(index: int, said: Subtask, grounded: Subtask | None) -> RoundRecord:
        output = PlannerOutput(raw="", analysis="", subtask=said, model="octo")
        return RoundRecord(index, "", output, Feedback(ErrorCode.OK, "None"), grounded=grounded)

    spoken = [round_(1, Subtask("Open", "fridge_1"), None), round_(2, Subtask("Pick", "potted_meat_can_1"), None)]
    assert task_progress([["[Open, fridge]", "[Pick, meat_can]"]], spoken, resolver).value == 0
    grounded = [round_(1, Subtask("Open", "fridge_1"), Subtask("Open", "fridge")),
                round_(2, Subtask("Pick", "potted_meat_can_1"), Subtask("Pick", "meat_can"))]
    assert task_progress([["[Open, fridge]", "[Pick, meat_can]"]], grounded, resolver).value == 1

"""The evaluation language on hand-made state sequences: predicates, relations, constraints, unrolling, PC,
failure explanations, JSON and validation."""

from __future__ import annotations

import pytest
from worlds import obj, world

from homiebot.tasks.partnr.language import (
    DifferentArgConstraint,
    EvaluationError,
    EvaluationFunction,
    EvaluationProposition,
    EvaluationPropositionDependency,
    SameArgConstraint,
    TemporalConstraint,
    TerminalSatisfactionConstraint,
    task_labels,
    unroll_number,
)
from homiebot.tasks.partnr.predicates import PREDICATES
from homiebot.tasks.partnr.tracker import PropositionTracker, evaluate_states, percent_complete


def P(name: str, **args: object) -> EvaluationProposition:
    return EvaluationProposition(name, args)


def holds(prop: EvaluationProposition, state) -> bool:
    spec = PREDICATES[prop.function_name]
    assert spec.evaluate is not None
    return spec.evaluate(state, prop.args).is_satisfied


# ------------------------------------------------------------------------------------------ predicates


def test_on_top_and_inside_read_the_support_relation():
    on_table = world(obj("cup", "table"))
    in_fridge = world(obj("cup", "fridge", "in"))
    assert holds(P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]), on_table)
    assert not holds(P("is_inside", object_handles=["cup"], receptacle_handles=["table"]), on_table)
    assert holds(P("is_inside", object_handles=["cup"], receptacle_handles=["fridge"]), in_fridge)
    assert not holds(P("is_on_top", object_handles=["cup"], receptacle_handles=["fridge"]), in_fridge)
    # OR-lists: any of the objects on any of the receptacles
    assert holds(P("is_on_top", object_handles=["bat", "cup"], receptacle_handles=["counter", "sink"]), world())
    held = world(obj("cup", None, held=True), held="cup")
    assert not holds(P("is_on_top", object_handles=["cup"], receptacle_handles=["counter"]), held)


def test_in_room_by_name_or_alias_and_held_objects_travel_with_the_robot():
    prop = P("is_in_room", object_handles=["cup"], room_ids=["living_room"])
    assert not holds(prop, world())
    assert holds(prop, world(obj("cup", "table")))
    assert holds(prop, world(obj("cup", None, held=True), held="cup", robot_room="living_room"))
    assert not holds(prop, world(obj("cup", None, held=True), held="cup", robot_room="kitchen"))


def test_on_floor():
    prop = P("is_on_floor", object_handles=["cup"])
    assert holds(prop, world(obj("cup", None, None, x=0.5, z=0.05)))
    assert not holds(prop, world())
    assert not holds(prop, world(obj("cup", None, held=True), held="cup"))


def test_next_to_threshold_and_vertical_overlap():
    prop = P("is_next_to", entity_handles_a=["cup"], entity_handles_b=["book"])
    # boxes 0.1 m wide: centres 0.6 m apart = 0.5 m gap (inclusive), 0.62 m apart = 0.52 m gap
    assert holds(prop, world(obj("cup", "table", x=1.7), obj("book", "table", x=2.3)))
    assert not holds(prop, world(obj("cup", "table", x=1.68), obj("book", "table", x=2.3)))
    # side by side but one a metre higher: no vertical overlap
    assert not holds(prop, world(obj("cup", "table", x=2.0), obj("book", "table", x=2.1, z=1.9)))
    # an entity is never next to itself
    assert not holds(P("is_next_to", entity_handles_a=["cup"], entity_handles_b=["cup"]), world())


def test_clustered_needs_one_component_with_each_group():
    prop = P("is_clustered", **{"*args": [["spoon_1", "spoon_2"], ["cup"]], "number": [2, 1]})
    chain = world(obj("spoon_1", "table", x=1.5), obj("spoon_2", "table", x=1.9), obj("cup", "table", x=2.3))
    assert holds(prop, chain)  # spoon_1 - spoon_2 - cup, linked pairwise (0.3 m gaps)
    split = world(obj("spoon_1", "table", x=1.0), obj("spoon_2", "table", x=1.9), obj("cup", "table", x=2.3))
    assert not holds(prop, split)  # spoon_1 alone, 0.8 m from spoon_2
    result = PREDICATES["is_clustered"].evaluate(chain, prop.args)  # type: ignore[misc]
    assert result.info["*args"] == (("spoon_1", "spoon_2"), ("cup",))


def test_power_states_and_non_powerable_entities():
    on, off = P("is_powered_on", object_handles=["lamp"]), P("is_powered_off", object_handles=["lamp"])
    assert holds(on, world(lamp_on=True)) and not holds(off, world(lamp_on=True))
    assert holds(off, world(lamp_on=False)) and not holds(on, world(lamp_on=False))
    # a table is not powerable: neither on nor off
    assert not holds(P("is_powered_off", object_handles=["table"]), world())
    assert not holds(P("is_powered_on", object_handles=["table"]), world())


def test_clean_and_dirty_read_the_cleanliness_state():
    from dataclasses import replace

    dirty = world(replace(obj("cup", "counter"), is_clean=False))
    clean = world(replace(obj("cup", "counter"), is_clean=True))
    assert holds(P("is_dirty", object_handles=["cup"]), dirty) and not holds(P("is_clean", object_handles=["cup"]), dirty)
    assert holds(P("is_clean", object_handles=["cup"]), clean)
    # no cleanliness state (a table): neither
    assert not holds(P("is_clean", object_handles=["table"]), clean)
    assert not holds(P("is_dirty", object_handles=["table"]), clean)


def test_number_and_same_receptacle_follow_partnrs_set_evaluation():
    spoons = ["spoon_1", "spoon_2", "spoon_3"]
    two = P("is_on_top", object_handles=spoons, receptacle_handles=["table", "sink"], number=2)
    same = P("is_on_top", object_handles=spoons, receptacle_handles=["table", "sink"], number=2,
             is_same_receptacle=True)
    split = world(obj("spoon_1", "table"), obj("spoon_2", "sink"))
    assert holds(two, split) and not holds(same, split)
    together = world(obj("spoon_1", "sink"), obj("spoon_3", "sink"))
    assert holds(same, together)
    result = PREDICATES["is_on_top"].evaluate(together, same.args)  # type: ignore[misc]
    assert result.info == {"object_handles": "spoon_3", "receptacle_handles": "sink"}  # the last success
    failed = PREDICATES["is_on_top"].evaluate(world(), same.args)  # type: ignore[misc]
    assert failed.info == {"object_handles": "", "receptacle_handles": ""}


def test_extensions():
    assert holds(P("is_open", object_handles=["fridge"]), world(fridge_open=True))
    assert holds(P("is_closed", object_handles=["fridge"]), world())
    assert holds(P("is_held", object_handles=["cup", "book"]), world(obj("cup", None, held=True), held="cup"))
    assert holds(P("is_robot_in_room", room_ids=["kitchen"]), world(robot_room="kitchen"))
    away = P("is_on_or_in", object_handles=["cup"], receptacle_handles=["table", "fridge"])
    assert holds(away, world(obj("cup", "fridge", "in"))) and not holds(away, world())
    count = P("count_equals", object_handles=["spoon_1", "spoon_2", "spoon_3"], receptacle_handles=["counter"],
              relation="on", equals=2)
    assert not holds(count, world()) and holds(count, world(obj("spoon_1", "table")))
    kinds = P("has_distinct_categories", object_handles=["spoon_1", "spoon_2", "cup"], receptacle_handles=["table"],
              relation="on", number=2)
    assert not holds(kinds, world(obj("spoon_1", "table"), obj("spoon_2", "table")))
    assert holds(kinds, world(obj("spoon_1", "table"), obj("cup", "table")))


# ------------------------------------------------------------------------------------------ PC, constraints


def test_partnrs_own_percent_complete_examples():
    # PARTNR's test_compute_percent_complete: satisfied at [1, 2, -1, -1], no constraint broken -> 0.5;
    # [1, 2, 3, 4] with proposition 1 invalidated -> 0.75
    assert percent_complete([1, 2, -1, -1], [True] * 4) == 0.5
    assert percent_complete([1, 2, 3, 4], [True, False, True, True]) == 0.75
    assert percent_complete([], []) == 0.0


def cup_to(parent: str, relation: str = "on"):
    return world(obj("cup", parent, relation))


def test_temporal_order_same_round_is_a_violation():
    props = (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),
             P("is_on_top", object_handles=["book"], receptacle_handles=["counter"]))
    fn = EvaluationFunction(props, (), (TemporalConstraint(((0, 1),)),))
    in_order = [world(), world(obj("cup", "table")), world(obj("cup", "table"), obj("book", "counter"))]
    assert evaluate_states(fn, in_order).success
    reversed_ = [world(), world(obj("book", "counter")), world(obj("cup", "table"), obj("book", "counter"))]
    result = evaluate_states(fn, reversed_)
    assert result.percent_complete == 0.5 and result.valid == (True, False)
    same_round = [world(), world(obj("cup", "table"), obj("book", "counter"))]
    assert evaluate_states(fn, same_round).percent_complete == 0.5
    assert "Steps were completed out of order:" in result.explanation
    assert "book placed on top of the counter should have been completed after:\n   - cup placed on top of" \
        in result.explanation


def test_same_and_different_argument_with_or_lists():
    spoons = ["spoon_1", "spoon_2"]
    props = (P("is_on_top", object_handles=["spoon_1"], receptacle_handles=["table", "sink"]),
             P("is_on_top", object_handles=["spoon_2"], receptacle_handles=["table", "sink"]))
    same = EvaluationFunction(props, (), (SameArgConstraint((0, 1), ("receptacle_handles", "receptacle_handles")),))
    apart = [world(), world(obj("spoon_1", "table")), world(obj("spoon_1", "table"), obj("spoon_2", "sink"))]
    together = [world(), world(obj("spoon_1", "sink")), world(obj("spoon_1", "sink"), obj("spoon_2", "sink"))]
    assert evaluate_states(same, together).success
    broken = evaluate_states(same, apart)
    assert broken.valid == (True, False)
    assert "Placements should have been made with the same furniture:" in broken.explanation
    different = EvaluationFunction(props, (), (DifferentArgConstraint((0, 1), ("receptacle_handles",) * 2),))
    assert evaluate_states(different, apart).success
    assert evaluate_states(different, together).valid == (True, False)
    # objects as the linked argument: "the same object" wording
    objs = EvaluationFunction(
        (P("is_on_top", object_handles=spoons, receptacle_handles=["table"]),
         P("is_inside", object_handles=spoons, receptacle_handles=["fridge"])), (),
        (SameArgConstraint((0, 1), ("object_handles", "object_handles")),))
    seq = [world(), world(obj("spoon_1", "table")), world(obj("spoon_1", "table"), obj("spoon_2", "fridge", "in"))]
    result = evaluate_states(objs, seq)
    assert not result.success and "The same object should have been used" in result.explanation


def test_terminal_satisfaction_catches_an_undone_step():
    props = (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),)
    undone = [world(), cup_to("table"), cup_to("sink")]
    free = EvaluationFunction(props)
    assert evaluate_states(free, undone).success  # without the constraint, satisfied once counts
    kept = EvaluationFunction(props, (), (TerminalSatisfactionConstraint((0,)),))
    result = evaluate_states(kept, undone)
    assert result.percent_complete == 0.0
    assert result.explanation == (
        "Episode failed. All steps were completed, but constraints were broken:\n"
        "Completed steps were later undone:\n - cup should have been placed on top of the table")


def test_missing_steps_explanation_exact():
    props = (P("is_on_top", object_handles=["cup", "book"], receptacle_handles=["table"]),
             P("is_powered_on", object_handles=["lamp"]),
             P("is_in_room", object_handles=["ball"], room_ids=["kitchen"]))
    result = evaluate_states(EvaluationFunction(props), [world(obj("cup", "table"))])
    assert result.explanation == ("Episode failed. Missing steps:\n"
                                  " - Object lamp should have been powered on\n"
                                  " - ball should have been moved to the kitchen")


# ------------------------------------------------------------------------------------------ dependencies


def dep_case(relation: str, mode: str, head_history: list[tuple[bool, bool]]) -> list[bool]:
    """Proposition 2 (the lamp is on, true throughout) gated by ``relation`` on propositions 0 (cup on the
    table) and 1 (book on the counter, true at home); returns whether 2 was satisfied at each state."""
    props = (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),
             P("is_on_top", object_handles=["book"], receptacle_handles=["counter"]),
             P("is_powered_on", object_handles=["lamp"]))
    fn = EvaluationFunction(props, (EvaluationPropositionDependency((2,), (0, 1), relation, mode),))
    tracker = PropositionTracker(fn)
    seen = []
    for cup_on_table, book_on_counter in head_history:
        changes = ([obj("cup", "table")] if cup_on_table else []) + ([obj("book", "counter")] if book_on_counter else [])
        seen.append(tracker.update(world(*changes, lamp_on=True))[2].is_satisfied)
    return seen


@pytest.mark.parametrize(
    ("relation", "mode", "history", "expected"),
    [
        ("while_satisfied", "all", [(False, False), (True, False), (True, True), (False, True)], [False, False, True, False]),
        ("while_satisfied", "any", [(False, False), (True, False), (True, True), (False, True)], [False, True, True, True]),
        ("after_satisfied", "all", [(True, False), (False, False), (False, True), (False, False)], [False, False, True, True]),
        ("after_satisfied", "any", [(False, False), (True, False), (False, False)], [False, True, True]),
        ("after_unsatisfied", "all", [(True, True), (False, True), (False, False), (True, True)], [False, False, True, True]),
        ("after_unsatisfied", "any", [(True, True), (False, True), (True, True)], [False, True, True]),
        ("before_satisfied", "all", [(False, False), (True, False), (True, True)], [True, False, False]),
        ("before_satisfied", "any", [(False, False), (True, False), (True, True), (False, False)], [True, True, False, False]),
    ],
)
def test_dependency_relations(relation, mode, history, expected):
    assert dep_case(relation, mode, history) == expected


def test_dependency_gating_keeps_the_unevaluated_result_and_lag_reproduces_partnr():
    # "Put the cup on the table and the book next to it": next-to evaluated while the cup is on the table.
    props = (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),
             P("is_next_to", entity_handles_a=["book"], entity_handles_b=["cup"]))
    fn = EvaluationFunction(props, (EvaluationPropositionDependency((1,), (0,), "while_satisfied"),),
                            (TerminalSatisfactionConstraint((0, 1)),))
    # the cup and the book both arrive in the last round (the book was already on the table)
    seq = [world(), world(obj("cup", "table", x=1.8), obj("book", "table", x=2.1))]
    assert evaluate_states(fn, seq).success
    # PARTNR's one-state lag: the gate reads the state before, where the cup was not yet there
    lagged = evaluate_states(fn, seq, lag=True)
    assert lagged.percent_complete == 0.5
    # one more (unchanged) state and the lagged tracker catches up
    assert evaluate_states(fn, seq + [seq[-1]], lag=True).success


def test_paper_example_ball_and_bat():
    """PARTNR A.5.3: move the ball and bat to the kitchen, next to each other; then move them to the living
    room (the closet of the paper)."""
    props = (P("is_in_room", object_handles=["ball"], room_ids=["kitchen"]),
             P("is_in_room", object_handles=["bat"], room_ids=["kitchen"]),
             P("is_next_to", entity_handles_a=["ball"], entity_handles_b=["bat"]),
             P("is_on_top", object_handles=["ball"], receptacle_handles=["table"]))
    fn = EvaluationFunction(
        props,
        (EvaluationPropositionDependency((2,), (0, 1), "while_satisfied"),
         EvaluationPropositionDependency((3,), (0, 1), "after_satisfied")),
        (TemporalConstraint.from_groups([[0, 1, 2], [3]]), TerminalSatisfactionConstraint((2, 3))),
    )
    # the ball starts on the table: without the after_satisfied gate proposition 3 would hold at t=0
    start = world(obj("ball", "table", x=1.7), obj("bat", "table", x=2.3))
    kitchen = world(obj("ball", "counter", x=-2.1), obj("bat", "counter", x=-1.8))
    back = world(obj("ball", "table", x=1.7), obj("bat", "counter", x=-1.8))
    result = evaluate_states(fn, [start, kitchen, back])
    assert result.satisfied_at == (1, 1, 1, 2)
    # the next-to placement was later undone (not re-satisfied in the kitchen): terminal breaks it
    assert result.valid == (True, True, False, True) and result.percent_complete == 0.75
    fn_final = EvaluationFunction(fn.propositions, fn.dependencies,
                                  (fn.constraints[0], TerminalSatisfactionConstraint((3,))))
    assert evaluate_states(fn_final, [start, kitchen, back]).success
    assert evaluate_states(fn_final, [start, back]).percent_complete == 0.25  # only the bat reached the kitchen


def test_cup_to_the_sink_then_back_to_the_table():
    props = (P("is_on_top", object_handles=["cup"], receptacle_handles=["sink"]),
             P("is_on_top", object_handles=["cup"], receptacle_handles=["counter"]))
    fn = EvaluationFunction(props, (EvaluationPropositionDependency((1,), (0,), "after_unsatisfied"),),
                            (TemporalConstraint(((0, 1),)), TerminalSatisfactionConstraint((1,))))
    # the cup starts on the counter: proposition 1 is gated until the cup has left the sink
    assert evaluate_states(fn, [world()]).percent_complete == 0.0
    assert evaluate_states(fn, [world(), cup_to("sink"), world()]).success
    assert evaluate_states(fn, [world(), cup_to("sink")]).percent_complete == 0.5


# ------------------------------------------------------------------------------------------ unrolling


def test_unrolling_counts_each_object():
    spoons = ["spoon_1", "spoon_2", "spoon_3"]
    fn = EvaluationFunction((P("is_on_top", object_handles=spoons, receptacle_handles=["table"], number=3),),
                            (), (TerminalSatisfactionConstraint((0,)),))
    unrolled = unroll_number(fn)
    assert [p.args["number"] for p in unrolled.propositions] == [3, 1, 2]
    assert unrolled.terminal_indices() == {0, 1, 2}
    two = evaluate_states(fn, [world(), world(obj("spoon_1", "table"), obj("spoon_2", "table"))])
    assert two.percent_complete == pytest.approx(2 / 3)
    assert "spoon should have been placed on top of the table" in two.explanation


def test_unrolling_temporal_and_different_constraints():
    fn = EvaluationFunction(
        (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),
         P("is_on_top", object_handles=["spoon_1", "spoon_2"], receptacle_handles=["table"], number=2),
         P("is_on_top", object_handles=["book"], receptacle_handles=["sink"])),
        (), (TemporalConstraint(((0, 1), (1, 2))), DifferentArgConstraint((1, 2), ("receptacle_handles",) * 2)))
    unrolled = unroll_number(fn)
    temporal = unrolled.constraints[0]
    assert isinstance(temporal, TemporalConstraint)
    assert set(temporal.dag_edges) == {(0, 1), (1, 2), (0, 3), (3, 2)}
    differents = [c for c in unrolled.constraints if isinstance(c, DifferentArgConstraint)]
    assert [c.proposition_indices for c in differents] == [(1, 2), (3, 2)]


def test_unrolling_fixes_partnrs_dependency_index_bug():
    """Proposition 1 (two spoons on the table) may only be evaluated after the cup reached the table;
    proposition 2 (the book on the sink) is ungated. Upstream adds the copy counter (1) to the gate instead
    of the copy's index (3): the copy goes ungated and proposition 1 twice."""
    fn = EvaluationFunction(
        (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),
         P("is_on_top", object_handles=["spoon_1", "spoon_2"], receptacle_handles=["table"], number=2),
         P("is_on_top", object_handles=["book"], receptacle_handles=["sink"])),
        (EvaluationPropositionDependency((1,), (0,), "after_satisfied"),))
    fixed, buggy = unroll_number(fn), unroll_number(fn, upstream_dependency_bug=True)
    assert fixed.dependencies[0].proposition_indices == (1, 3)
    assert buggy.dependencies[0].proposition_indices == (1, 1)
    # one spoon on the table before the cup arrives, then the cup
    seq = [world(), world(obj("spoon_1", "table")), world(obj("spoon_1", "table"), obj("cup", "table"))]
    fixed_run, buggy_run = PropositionTracker(fn), PropositionTracker(fn, upstream_dependency_bug=True)
    for s in seq:
        fixed_run.update(s)
        buggy_run.update(s)
    # fixed: both spoon propositions open after the cup arrives (round 2), in the same round
    assert fixed_run.satisfied_at == [2, -1, -1, 2]
    # upstream: the copy (one spoon) was never gated and counted the spoon placed before the cup
    assert buggy_run.satisfied_at == [2, -1, -1, 1]


# ------------------------------------------------------------------------------------------ JSON, validation, labels


def full_function() -> EvaluationFunction:
    return EvaluationFunction(
        (P("is_on_top", object_handles=["spoon_1", "spoon_2"], receptacle_handles=["table"], number=2,
           is_same_receptacle=False),
         P("is_next_to", entity_handles_a=["cup"], entity_handles_b=["book"], l2_threshold=0.5),
         P("is_clustered", **{"*args": [["spoon_1"], ["cup"]], "number": [1, 1]}),
         P("is_powered_off", object_handles=["lamp"])),
        (EvaluationPropositionDependency((1,), (0,), "while_satisfied", "any"),),
        (TemporalConstraint(((0, 3),), 4), SameArgConstraint((0, 1), ("receptacle_handles", "entity_handles_b"), 4),
         DifferentArgConstraint((0, 2), ("object_handles", "*args_0"), 4), TerminalSatisfactionConstraint((0, 1, 2), 4)),
    )


def test_json_round_trip_of_every_type():
    fn = full_function()
    data = fn.to_json()
    assert data["evaluation_constraints"][0] == {"type": "TemporalConstraint",
                                                 "args": {"dag_edges": [[0, 3]], "n_propositions": 4}}
    assert data["evaluation_proposition_dependencies"][0] == {
        "proposition_indices": [1], "depends_on": [0], "relation_type": "while_satisfied", "dependency_mode": "any"}
    assert EvaluationFunction.from_json(data, "t") == fn
    assert task_labels(fn) == {"spatial", "temporal", "heterogeneous"}


def broken(mutate) -> str:
    data = full_function().to_json()
    mutate(data)
    with pytest.raises(EvaluationError) as err:
        EvaluationFunction.from_json(data, "partnr-007")
    return str(err.value)


def test_validation_names_the_task_and_the_proposition():
    msg = broken(lambda d: d["evaluation_propositions"][3].update(function_name="is_sparkling"))
    assert msg.startswith("task partnr-007: proposition 3 (is_sparkling): unknown predicate")
    msg = broken(lambda d: d["evaluation_propositions"][3].update(function_name="is_filled", args={"room_ids": ["x"]}))
    assert msg.startswith("task partnr-007: proposition 3 (is_filled): unknown argument(s) room_ids")
    msg = broken(lambda d: d["evaluation_proposition_dependencies"][0].update(depends_on=[9]))
    assert msg == "task partnr-007: dependency 0: proposition index 9 out of range (the task has 4 propositions)"
    msg = broken(lambda d: d["evaluation_constraints"][0]["args"].update(dag_edges=[[0, 3], [3, 0]]))
    assert "proposition 0 (is_on_top): the temporal constraint is not a DAG" in msg
    msg = broken(lambda d: d["evaluation_proposition_dependencies"].append(
        {"proposition_indices": [0], "depends_on": [1], "relation_type": "after_satisfied"}))
    assert "dependencies form a cycle" in msg
    msg = broken(lambda d: d["evaluation_constraints"][1]["args"].update(arg_names=["room_ids", "entity_handles_b"]))
    assert msg.startswith("task partnr-007: proposition 0 (is_on_top): constraint 1 names argument 'room_ids'")
    msg = broken(lambda d: d["evaluation_propositions"][0]["args"].update(number=5))
    assert "'number' 5 exceeds" in msg
    msg = broken(lambda d: d["evaluation_constraints"].append({"type": "NearbyConstraint", "args": {}}))
    assert "malformed constraint" in msg and "NearbyConstraint" in msg
    with pytest.raises(EvaluationError, match="'ghost' not in the scene"):
        EvaluationFunction.from_json(
            {"evaluation_propositions": [{"function_name": "is_on_floor", "args": {"object_handles": ["ghost"]}}]},
            "t", known_entities={"cup"})


def test_explanations_are_counted_by_kind():
    from homiebot.tasks.partnr.explain import explanation_kind

    cup, book = (P("is_on_top", object_handles=["cup"], receptacle_handles=["table"]),
                 P("is_on_top", object_handles=["book"], receptacle_handles=["counter"]))
    both = world(obj("cup", "table"), obj("book", "counter"))
    ordered = EvaluationFunction((cup, book), (), (TemporalConstraint(((0, 1),)),))
    kept = EvaluationFunction((cup,), (), (TerminalSatisfactionConstraint((0,)),))
    spoons = (P("is_on_top", object_handles=["spoon_1"], receptacle_handles=["table", "sink"]),
              P("is_on_top", object_handles=["spoon_2"], receptacle_handles=["table", "sink"]))
    same = EvaluationFunction(spoons, (), (SameArgConstraint((0, 1), ("receptacle_handles",) * 2),))
    different = EvaluationFunction(spoons, (), (DifferentArgConstraint((0, 1), ("receptacle_handles",) * 2),))
    apart = [world(), world(obj("spoon_1", "table"), obj("spoon_2", "sink"))]
    together = [world(), world(obj("spoon_1", "sink"), obj("spoon_2", "sink"))]
    cases = {
        "none": (ordered, [world(), world(obj("cup", "table")), both]),
        "missing steps": (ordered, [world(), world(obj("cup", "table"))]),
        "out of order": (ordered, [world(), world(obj("book", "counter")), both]),
        "undone": (kept, [world(), cup_to("table"), cup_to("sink")]),
        "same argument": (same, apart),
        "different argument": (different, together),
    }
    for kind, (fn, states) in cases.items():
        assert explanation_kind(evaluate_states(fn, states).explanation) == kind, kind

"""The text mode's world description of the current state: furniture open or closed, what lies on or in each piece
(both relations kept apart, an object inside an object nested), the floor, the held object left to the Inventory,
and the names within reach by the expert's rule (a Go to stretches it to 2 m for its own target); and a round's
user turn built from it, what stays the same within an episode first and what changes last."""

from __future__ import annotations

from dataclasses import replace

import pytest

from homiebot.planner.base import ChatTurn, PlanRequest
from homiebot.planner.prompt import INSTRUCTION_SUFFIX, build_instruction, system_prompt
from homiebot.planner.reach import ReachRule
from homiebot.planner.text_planning import CHANGED_PREFIX, TextTranscript, describe_world, world_changes
from homiebot.types import EntityKind, EntityState, Pose2D, Subtask, WorldState


def _entity(name: str, kind: EntityKind, x: float, room: str | None = "kitchen", **fields) -> EntityState:
    return EntityState(name=name, category=name, kind=kind, aliases=(), position=(x, 0.0, 0.5),
                       bbox_min=(x - 0.2, -0.2, 0.0), bbox_max=(x + 0.2, 0.2, 1.0), room=room, **fields)


def _state() -> WorldState:
    room, furniture, obj = EntityKind.ROOM, EntityKind.FURNITURE, EntityKind.OBJECT
    entities = [
        _entity("kitchen", room, 0.0, room=None),
        _entity("hallway", room, 9.0, room=None),
        _entity("cabinet", furniture, 0.8, articulated=True, interactive=True, is_open=True),
        _entity("counter", furniture, 2.4),
        _entity("cup", obj, 0.8, parent="cabinet", relation="in"),
        _entity("plate", obj, 0.8, parent="cabinet", relation="on"),
        _entity("bowl", obj, 2.4, parent="counter", relation="on"),
        _entity("apple", obj, 2.4, parent="bowl", relation="in"),
        _entity("sock", obj, 5.0),  # on the floor
        _entity("can", obj, 0.0, parent=None, held=True),
    ]
    return WorldState(robot=Pose2D(0.0, 0.0, 0.0), robot_radius=0.3, held="can",
                      entities={e.name: e for e in entities}, robot_room="kitchen")


def test_the_world_now_in_one_line_per_room():
    text = describe_world(_state(), None)
    assert text.splitlines() == [
        "World now:",
        "kitchen: cabinet (open) [in: cup; on: plate], counter [on: bowl [in: apple]], floor [on: sock]",
        "hallway: nothing",
        "Robot: in kitchen; within reach: cabinet, cup, plate",
    ]
    assert "can" not in text.replace("cabinet", "")  # held: the Inventory line names it


def test_a_go_to_puts_its_target_within_reach_up_to_two_metres():
    state = _state()
    rule = ReachRule()
    assert state.reach_distance("counter") > rule.interact_m  # 1.9 m: not within reach from here
    assert not rule.reachable(state, "counter", None)
    assert rule.reachable(state, "counter", Subtask("Go to", "counter"))
    assert not rule.reachable(state, "counter", Subtask("Go to", "bowl"))  # only the Go to's own target
    assert describe_world(state, Subtask("Go to", "counter")).endswith("within reach: cabinet, counter, cup, plate")


# ------------------------------------------------------------------ a round's user turn: stable first, changing last


def _moved(state: WorldState, **changes: dict) -> WorldState:
    """``state`` with some entities' fields replaced (name -> fields)."""
    entities = dict(state.entities)
    for name, fields in changes.items():
        entities[name] = replace(entities[name], **fields)
    return replace(state, entities=entities)


def _request(round_index: int, state: WorldState, history: str = "", task: str = "tidy up") -> PlanRequest:
    return PlanRequest(system_prompt=system_prompt(), instruction=build_instruction(task, ("can",), history, "None"),
                       images=(), task=task, round_index=round_index, world_state=state)


def test_world_changes_names_each_changed_piece_as_it_is_now():
    start = describe_world(_state(), None).splitlines()[1:-1]
    assert world_changes(start, start) == f"{CHANGED_PREFIX}nothing"
    # The cup moved from the cabinet to the floor of the hallway, the cabinet closed, the sock was picked up.
    now = _moved(_state(), cup={"parent": None, "room": "hallway"}, cabinet={"is_open": False},
                 sock={"held": True})
    lines = describe_world(now, None).splitlines()[1:-1]
    assert world_changes(start, lines) == (
        f"{CHANGED_PREFIX}cabinet (closed) [on: plate], kitchen floor [empty], hallway floor [on: cup]"
    )
    emptied = _moved(_state(), plate={"parent": "counter"}, cup={"parent": "counter", "relation": "on"})
    assert world_changes(start, describe_world(emptied, None).splitlines()[1:-1]) == (
        f"{CHANGED_PREFIX}cabinet (open) [empty], counter [on: bowl [in: apple], cup, plate]"
    )


def test_a_fresh_round_keeps_what_stays_in_front_and_what_changes_at_the_end():
    """The order the prefix reuse needs (text_planning's docstring): the task, the world at the start and the
    history are the same or only grow within an episode; the changed pieces, the robot, the inventory and the
    feedback come after them. Nothing is lost: the changed line and the start give the world now."""
    transcript = TextTranscript()
    first = transcript.fresh_chat(_request(1, _state()))[-1].text
    heads = [line.split(":", 1)[0] for line in first.splitlines()]
    assert heads == ["Task", "World at the start", "kitchen", "hallway", "Historical Execution",
                     "Changed since the start", "Robot", "Inventory", "Feedback", INSTRUCTION_SUFFIX.strip()]
    later = _moved(_state(), cabinet={"is_open": False})
    second = transcript.fresh_chat(_request(2, later, history="(1) Close, cabinet(success) "))[-1].text
    shared = first.split("\nHistorical Execution: ")[0] + "\nHistorical Execution: "
    assert second.startswith(shared)  # the start is the episode's, not this round's
    assert f"\n{CHANGED_PREFIX}cabinet (closed) [in: cup; on: plate]\nRobot: in kitchen;" in second
    assert second.endswith(f"Inventory: can\nFeedback: None\n{INSTRUCTION_SUFFIX}")
    # A new episode (round 1) starts from its own state.
    again = transcript.fresh_chat(_request(1, later))[-1].text
    assert "kitchen: cabinet (closed) [in: cup; on: plate]" in again and f"{CHANGED_PREFIX}nothing" in again


def test_the_growing_chat_sends_the_world_lines_again_only_when_the_world_changed():
    transcript = TextTranscript()
    request = _request(1, _state())
    first = transcript.conversation(request)
    assert first[-1].text == transcript.fresh_chat(request)[-1].text  # round 1: the same turn in both forms
    transcript.keep(first, "Analysis: a\nSubtask: [Pick, cup]\nModel: RT-1-X", request)
    same = _request(2, _state(), history="(1) Pick, cup(fail) ")
    second = transcript.conversation(same)[-1].text
    assert second == f"Historical Execution: (1) Pick, cup(fail)\nInventory: can\nFeedback: None\n{INSTRUCTION_SUFFIX}"
    transcript.keep(transcript.conversation(same), "Analysis: b\nSubtask: [Close, cabinet]\nModel: RT-1-X", same)
    closed = _request(3, _moved(_state(), cabinet={"is_open": False}), history="(1) Pick, cup(fail) (2) Close, cabinet(success) ")
    third = transcript.conversation(closed)[-1].text
    assert third.startswith(
        f"Historical Execution: (2) Close, cabinet(success)\n{CHANGED_PREFIX}cabinet (closed) [in: cup; on: plate]\n"
        "Robot: in kitchen; within reach: cabinet, cup, plate\nInventory: can\n"
    )


def test_an_adopted_answer_replaces_the_kept_one_in_the_chat_the_next_round_is_sent():
    """DAgger's takeover (homiebot.training.corrections): the expert's answer was executed, not the model's."""
    transcript = TextTranscript()
    with pytest.raises(ValueError, match="no answer kept"):
        transcript.adopt("Subtask: [End]")
    request = _request(1, _state())
    transcript.keep(transcript.conversation(request), "Subtask: [Pick, cup]\nModel: RT-1-X", request)
    transcript.adopt("Subtask: [Close, cabinet]\nModel: RT-1-X")
    chat = transcript.conversation(_request(2, _state(), history="(1) Close, cabinet(success) "))
    assert [m.role for m in chat] == ["system", "user", "assistant", "user"]
    assert chat[2].text == "Subtask: [Close, cabinet]\nModel: RT-1-X"


def _kept(transcript: TextTranscript, request: PlanRequest, answer: str) -> str:
    """The user turn ``transcript`` sends for ``request``; the turn and ``answer`` are then kept."""
    conversation = transcript.conversation(request)
    transcript.keep(conversation, answer, request)
    return conversation[-1].text


def test_a_compact_turn_sends_only_what_the_chat_does_not_hold():
    """compact_turns (text_planning's docstring): after the whole first turn, a later turn has the pieces changed
    since the previous turn, the robot line when it changed, the inventory and the feedback; the history line only
    when a round did not add exactly one item, and no closing instruction."""
    compact, plain = TextTranscript(compact=True), TextTranscript()
    rounds = [
        (_request(1, _state()), "Subtask: [Close, cabinet]\nModel: octo"),
        (_request(2, _moved(_state(), cabinet={"is_open": False}), history="(1) Close, cabinet(success) "),
         "Subtask: [Go to, counter]\nModel: NoMaD"),
        # The robot went to the counter and the cup fell out of reach: the robot line changed, no piece did.
        (_request(3, _moved(_state(), cabinet={"is_open": False}, cup={"room": "kitchen"}),
                  history="(1) Close, cabinet(success) (2) Go to, counter(success) "), "Subtask: [Pick, bowl]\nModel: RT-1-X"),
        # The pick failed: nothing changed in the world, so the turn is the feedback alone.
        (_request(4, _moved(_state(), cabinet={"is_open": False}),
                  history="(1) Close, cabinet(success) (2) Go to, counter(success) (3) Pick, bowl(failure) "),
         "Subtask: [End]\nModel: None"),
    ]
    turns = [_kept(compact, r, a) for r, a in rounds]
    plain_turns = [_kept(plain, r, a) for r, a in rounds]
    assert turns[0] == plain_turns[0]  # the whole first turn, closing instruction included
    assert turns[1] == "Changed: cabinet (closed) [in: cup; on: plate]\nInventory: can\nFeedback: None\n"
    assert turns[3] == "Inventory: can\nFeedback: None\n"
    assert all(len(c) < len(p) for c, p in zip(turns[1:], plain_turns[1:], strict=True))
    assert not any(INSTRUCTION_SUFFIX.strip() in t or "Historical Execution" in t for t in turns[1:])


def test_a_compact_turn_names_the_robot_line_when_it_changed_and_the_history_when_it_is_not_one_item():
    transcript = TextTranscript(compact=True)
    _kept(transcript, _request(1, _state()), "Subtask: [Go to, counter]\nModel: NoMaD")
    went = replace(_request(2, _state(), history="(1) Go to, counter(success) "),
                   history=(ChatTurn("", "Subtask: [Go to, counter]\nModel: NoMaD"),))
    # describe_world reads the last answer (a Go to counter) to stretch the reach: only the robot line changed.
    turn = _kept(transcript, went, "Subtask: [Pick, bowl]\nModel: RT-1-X")
    assert turn == "Robot: in kitchen; within reach: cabinet, counter, cup, plate\nInventory: can\nFeedback: None\n"
    # An answer that added no item (the history did not grow): the history line says so.
    transcript = TextTranscript(compact=True)
    _kept(transcript, _request(1, _state()), "Subtask: [Pick, cup]\nModel: RT-1-X")
    assert _kept(transcript, _request(2, _state()), "x").startswith("Historical Execution: None\n")
    # Two items at once (a wrapper ran two subtasks): both are named.
    assert _kept(transcript, _request(3, _state(), history="(1) Pick, cup(success) (2) Put, cup, counter(success) "),
                 "x").startswith("Historical Execution: (1) Pick, cup(success) (2) Put, cup, counter(success)\n")

"""The expert planner: a privileged, closed-loop planner that reads the goal and the simulator's state.

It is HomieBot's upper baseline and the generator of training data (EMMOE appendix F), so it answers
exactly like a trained model: ``Analysis: ...`` (one or two sentences in the style of the EMMOE data),
``Subtask: [..]`` and ``Model: ..``, one subtask per round.

Each round it recomputes the plan from the goal (:class:`~homiebot.tasks.goals.GoalSpec`) and the current
:class:`~homiebot.types.WorldState`, so it re-plans after any failure without special cases: after an
L3 (the fridge is closed) the state shows the fridge closed, after an L1 the hand is full, after a D1 the
target is far. The order of work:

1. ``inspected`` furniture not yet seen open: go there, open it;
2. object moves (``placed`` incl. count / all / from / except, ``count`` up or down to exactly N,
   ``cleared``), one object at a time: open the object's container and the destination container
   *before* picking (a one-hand robot cannot open while holding), go to the object, pick it, go to the
   destination, put it. Holding an object whose destination is closed, it first puts the object on a
   nearby surface (appendix I, case 1);
3. ``articulation`` conditions (open / close a door or drawer);
4. close what it opened (when the round budget allows it; not for goals that want it open);
5. ``holding``: pick the object and keep it; 6. ``robot_in``: go to the room;
7. ``[End]``. A ``powered_off`` condition cannot be met with EMMOE's action list (no skill switches power):
   the expert says so in its Analysis and leaves it unmet.

Model choice follows EMMOE table E2: NoMaD for rooms and furniture, PixNav for small objects, octo for
open/close, RT-1-X for pick/put.

Decisions (tested in ``tests/planner/test_expert.py``):

* Objects are chosen in a stable order (held first, then those outside closed containers, then by
  distance to the destination, then by name), and a move is kept until it is done, so the plan does not
  flip-flop as the robot moves.
* Objects with no stated destination (``cleared``, the surplus of a ``count``) go to the nearest surface
  that no goal condition mentions (the "dump" surface).
* Put goes *in* an articulated furniture with an interior (fridge, drawer, cabinet), else *on* its
  surface, else in its interior (a sink); this is the embedded simulator's rule, read from the scene spec
  in ``request.scene``. Parking and dump spots are non-articulated surfaces.
* A target counts as within reach when its reach distance lies in [0.1 m, ``interact_range_m``], or in
  [0.1 m, 2 m] right after a successful Go to it (the simulator may stop a little farther away).
* Where it chooses among candidates it holds equally good (the objects of a move with the same key, which opened
  furniture to close first, near which surface to put an object down), the last tie-break is the name.
  :meth:`ExpertPlanner.equally_good` lists the answers of every such tie-break (each candidate named first in
  turn): the subtasks the expert would accept as equally good in a round, which an offline score may accept
  beside the exact answer (:mod:`homiebot.training.offline_eval`).
* After the same subtask fails twice in a row with E1, the object is set aside for another candidate when
  there is one.
* **Bounded repeats.** The identical subtask failing again and again is retried a bounded number of times, then
  replaced (:func:`repeat_limit`: three rounds in a row for an E code, whose three tries each a noisy skill may fail
  by chance; two for any other code, which a retry from the same state meets again). The first time, the expert
  takes a detour and then tries once more: a Go to an object goes where the world state says it is (its receptacle,
  else its room), a Pick, Open or Close goes to its target afresh, a Put to its place, a Go to furniture to its room.
  When the subtask fails as often again after its detour, a Put's object is put down on a free surface and taken
  again (another grasp: it was the held object that met the place), and the Put tried again; any other subtask, and
  that Put failing as often once more, has its target given up (marked lost, as after a search): another instance
  is chosen, a held object is put down elsewhere, or, with nothing else to do, the expert ends. A
  Put answered L2 ("the hand is empty") while the state shows the object in the hand (a physical Pick that reported
  a failure but left the object held) is not retried at all: the executor's inventory and the hand disagree, no
  Pick or Put can succeed (the inventory refuses the Put, the hand the Pick), and the expert finishes what needs no
  hand. An episode in which nothing fails is planned exactly as before (``tests/planner/test_expert_suite.py``).
* After an F2 on a name (a perception that has not seen it yet), the expert goes to where it can be
  seen: the object's receptacle, after a second F2 its room, then tries again; an F2 after that marks the
  instance lost (no longer chosen; with nothing else to do the expert ends). With the default alias
  grounder F2 never happens to it.
* With a perception world model the request carries ``perceived_names`` (simulator instance -> the name the
  world graph knows it by; an image-built graph numbers its own ``apple_1``, ``apple_2`` in the order it
  found them). The expert still decides over simulator instances but *speaks* perception's names: in the
  Subtask and in the Analysis. An instance perception has not seen is not named at all (its category name
  could ground to another instance of that category and loop): the expert searches for it as after an F2
  (its receptacle, when perception knows it, then its room) and marks it lost when it is still unseen there.
  The translation is :class:`homiebot.planner.expert_names.SpokenNames`.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from homiebot.config import FAR_THRESHOLD_M, NEAR_THRESHOLD_M
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.expert_names import SpokenNames
from homiebot.planner.prompt import format_output, parse_output
from homiebot.planner.reach import INTERACT_RANGE_M, ReachRule
from homiebot.sim.scene import SceneSpec
from homiebot.tasks.goals import (
    Articulation,
    Cleared,
    Count,
    GoalSpec,
    Holding,
    Inspected,
    Placed,
    PoweredOff,
    RobotIn,
    condition_holds,
    is_at,
    matches_category,
    select,
)
from homiebot.types import Action, EntityKind, EntityState, ErrorCode, Subtask, WorldState

log = logging.getLogger(__name__)

F2_SUFFIX = " does not exist! Please choose another object"  # appendix E.1's F2 message after the target
NAV_ROOM_MODEL = "NoMaD"  # rooms and large furniture (EMMOE table E2)
NAV_OBJECT_MODEL = "PixNav"  # small objects
ARTICULATION_MODEL = "octo"
GRASP_MODEL = "RT-1-X"


def repeat_limit(code: ErrorCode | None) -> int:
    """How many rounds in a row the identical subtask may fail with ``code`` before the expert replaces it (module
    docstring, "Bounded repeats"): 3 for an E code (and an unknown one), 2 for any other."""
    return 3 if code is None or code.family == "E" else 2


@dataclass(frozen=True)
class Move:
    """One object to carry to a receptacle."""

    obj: str
    relation: str  # "on" | "in"
    receptacle: str


@dataclass(frozen=True)
class Decision:
    subtask: Subtask
    model: str
    reason: str  # the second half of the Analysis: what to do next and why


@dataclass
class _Memory:
    """What the expert remembers across the rounds of one episode."""

    initial: WorldState | None = None
    seen_open: set[str] = field(default_factory=set)
    committed: Move | None = None
    last: Subtask | None = None
    failures_in_a_row: int = 0
    set_aside: set[str] = field(default_factory=set)
    unfound: Counter[str] = field(default_factory=Counter)  # instances answered with F2 (perception has not seen them)
    last_spoken: Subtask | None = None  # ``last`` in perception's names (what the history shows)
    spoken: dict[str, str] = field(default_factory=dict)  # the last subtask's spoken names -> instances
    looked_at: set[str] = field(default_factory=set)  # places reached by a Go to since the last Open
    lost: set[str] = field(default_factory=set)  # searched everywhere, still not found: no longer chosen
    repeated: Subtask | None = None  # the subtask that failed in the last rounds, in a row (instance names)
    repeats: int = 0  # how many rounds in a row ``repeated`` failed
    detoured: set[Subtask] = field(default_factory=set)  # subtasks whose detour was taken (the next limit: give up)
    detour: Subtask | None = None  # the subtask whose detour is due this round
    given_up: set[str] = field(default_factory=set)  # lost after failing past a detour: lost even when seen
    regrasp: set[str] = field(default_factory=set)  # held objects to put down elsewhere and take again
    regrasped: set[Subtask] = field(default_factory=set)  # Puts whose object was put down and taken again for them
    hand_unusable: bool = False  # no Put or Pick can succeed any more (module docstring, "Bounded repeats")


def _closed(entity: EntityState) -> bool:
    return entity.articulated and entity.is_open is False


def _article_name(name: str) -> str:
    return f"the {name}"


class ExpertPlanner(Planner):
    """Privileged planner: goal spec + world state -> the next useful subtask in EMMOE's text format."""

    name = "expert"
    privileged = True
    accepts_free_text = False

    def __init__(
        self,
        interact_range_m: float = INTERACT_RANGE_M,
        near_threshold_m: float = NEAR_THRESHOLD_M,
        far_threshold_m: float = FAR_THRESHOLD_M,
        close_opened: bool = True,
    ) -> None:
        if not 0 <= near_threshold_m < interact_range_m <= far_threshold_m:
            raise ValueError("need 0 <= near_threshold_m < interact_range_m <= far_threshold_m")
        self.interact_range_m = interact_range_m
        self.near_threshold_m = near_threshold_m
        self.far_threshold_m = far_threshold_m
        self._reach = ReachRule(near_threshold_m, interact_range_m, far_threshold_m)
        self.close_opened = close_opened
        self._memory = _Memory()
        self._articulated: dict[str, bool] = {}
        self._names = SpokenNames()  # this round's request.perceived_names
        #: Among candidates held equally good, the name chosen first (None: by name alone); :meth:`equally_good`.
        self._preferred: str | None = None

    # ------------------------------------------------------------------------------------ Planner API

    def reset(self, task: str, seed: int = 0) -> None:
        self._memory = _Memory()

    def plan(self, request: PlanRequest) -> str:
        state = request.world_state
        goal = request.goal
        if state is None or not isinstance(goal, GoalSpec):
            raise ValueError(
                "the expert planner needs the privileged world state and a goal specification "
                "(run a built-in task, or choose a planner that takes free text)"
            )
        scene = request.scene
        self._articulated = {n: e.articulated for n, e in state.entities.items()}
        self._names = SpokenNames(request.perceived_names)
        max_rounds = request.max_rounds
        memory = self._memory
        if memory.initial is None:
            memory.initial = state
        self._observe_last_round(request)
        self._update_lost(state)
        memory.seen_open |= {n for n, e in state.entities.items() if e.is_open}

        decision = self._decide(state, goal, scene, rounds_left=max_rounds - request.round_index + 1)
        summary = self._summary(request, state, scene)
        reason = decision.reason
        if memory.last is None and reason.startswith("so "):
            reason = reason[3:]  # "According to my final task, I should ..."
        analysis = self._names.text(state, f"{summary}, {reason}")
        analysis = analysis[0].upper() + analysis[1:]
        memory.last = decision.subtask
        memory.last_spoken = self._names.subtask(state, decision.subtask)
        memory.spoken = {
            said: name
            for name, said in ((n, self._names.say(state, n)) for n in (decision.subtask.target, decision.subtask.place) if n)
        }
        return format_output(analysis, memory.last_spoken, decision.model)

    def equally_good(self, request: PlanRequest) -> list[Subtask]:
        """The subtasks this expert answers in ``request``'s round under each tie-break among candidates it holds
        equally good (module docstring): its own answer first, then, once each, the answers when one name of the
        state is preferred among its equals. The expert's memory is not changed (each answer is a copy's), so
        :meth:`plan` may follow with the same request. Subtasks are written as :meth:`plan` writes them (the
        spoken names)."""
        state = request.world_state
        names: list[str | None] = [None, *sorted(state.entities)] if state is not None else [None]
        found: list[Subtask] = []
        for name in names:
            twin = copy.deepcopy(self)
            twin._preferred = name
            # The expert's own decision, without what a subclass adds on top (an injected error).
            subtask = parse_output(ExpertPlanner.plan(twin, request)).subtask
            if subtask is not None and subtask not in found:
                found.append(subtask)
        return found

    def _tie(self, name: str) -> tuple[bool, str]:
        """The last sort key among equals: the preferred name first, then by name (:meth:`equally_good`)."""
        return name != self._preferred, name

    def _unseen(self, name: str) -> bool:
        return self._names.unseen(name)

    # ------------------------------------------------------------------------------------ memory

    def _observe_last_round(self, request: PlanRequest) -> None:
        memory = self._memory
        if memory.last is None or not request.history:
            return
        # The last answer in the window is ours; its feedback is request.feedback.
        previous = parse_output(request.history[-1].answer).subtask
        if previous is None or previous != memory.last_spoken:
            return
        failed = request.feedback != "None"
        if failed and request.feedback.endswith(F2_SUFFIX):
            said = request.feedback[: -len(F2_SUFFIX)]
            instance = memory.spoken.get(said, said)
            if memory.unfound[instance] > len(self._search_spots(request.world_state, instance)):
                self._lose(instance)  # searched everywhere already
            memory.unfound[instance] += 1
        elif not failed and memory.last.target:
            memory.unfound.pop(memory.last.target, None)
        if not failed and Action.parse(memory.last.action) is Action.GO_TO and memory.last.target:
            memory.looked_at.add(memory.last.target)  # the views from there are in the graph now
        elif not failed and Action.parse(memory.last.action) is Action.OPEN:
            memory.looked_at.clear()  # what the opened furniture held can be seen now, from wherever
        self._count_repeats(request, failed)
        if failed and "too difficult" in request.feedback:
            memory.failures_in_a_row += 1
            if memory.failures_in_a_row >= 2 and memory.committed is not None:
                memory.set_aside.add(memory.committed.obj)
                memory.committed = None
                memory.failures_in_a_row = 0
        elif not failed:
            memory.failures_in_a_row = 0

    def _count_repeats(self, request: PlanRequest, failed: bool) -> None:
        """Count the identical subtask's failures in a row, and at :func:`repeat_limit` replace it: a detour the
        first time, giving its target up after that (module docstring, "Bounded repeats")."""
        memory = self._memory
        last = memory.last
        assert last is not None
        code = request.last_error
        if not failed or request.feedback.endswith(F2_SUFFIX) or last.target is None:
            memory.repeated, memory.repeats = None, 0  # a success, or an F2 (the search after it is its own rule)
            return
        state = request.world_state
        if code is ErrorCode.L2 and state is not None and state.held is not None and state.held == last.target:
            log.debug("expert: the state shows %s in the hand, the executor an empty hand", state.held)
            memory.hand_unusable = True
            return
        memory.repeats = memory.repeats + 1 if last == memory.repeated else 1
        memory.repeated = last
        if memory.repeats < repeat_limit(code):
            return
        memory.repeated, memory.repeats = None, 0
        if last not in memory.detoured:
            memory.detoured.add(last)
            memory.detour = last
            return
        put = Action.parse(last.action) is Action.PUT
        if put and state is not None and state.held == last.target and last not in memory.regrasped:
            # Taken another way the object may go in (it is the held object that touches the place): put it down
            # elsewhere and take it again, then try the Put once more.
            memory.regrasped.add(last)
            memory.regrasp.add(last.target)
            return
        log.debug("expert: %s failed again after its detour; giving up %s", last.text(), last.target)
        if put and last.target in memory.given_up:
            memory.hand_unusable = True  # put down neither where it belongs nor anywhere else
        memory.given_up.add(last.target)
        self._lose(last.target)

    def _detour(self, state: WorldState, failing: Subtask) -> Decision | None:
        """The detour after ``failing`` reached its repeat limit: where to go before trying again (module docstring);
        None when there is nowhere else to go from (the subtask is then tried once more)."""
        action = Action.parse(failing.action)
        name = failing.place if action is Action.PUT else failing.target
        if name is None or name not in state.entities:
            return None
        entity = state.entities[name]
        if action is Action.GO_TO:
            spots = [s for s in (entity.parent, entity.room) if s and s != name and s in state.entities]
            spots = [s for s in spots if not self._unseen(s)]
            if not spots:
                return None
            spot = spots[0]
            model = NAV_OBJECT_MODEL if state.entities[spot].kind is EntityKind.OBJECT else NAV_ROOM_MODEL
            return Decision(Subtask("Go to", spot), model,
                            f"since I cant get to the {name} from here, I should go to {_article_name(spot)} where "
                            f"it is and try again from there")
        kind = entity.kind
        model = NAV_OBJECT_MODEL if kind is EntityKind.OBJECT else NAV_ROOM_MODEL
        return Decision(Subtask("Go to", name), model,
                        f"since I failed to {_phrase(failing)} again and again, I should go to "
                        f"{_article_name(name)} again and try from a new position")

    def _update_lost(self, state: WorldState) -> None:
        """With perception's names: an instance is lost while perception has not seen it although the robot has
        been to every place it can be seen from; found again as soon as perception sees it."""
        if not self._names.with_perception:
            return
        memory = self._memory
        memory.lost -= self._names.seen() - memory.given_up
        for name in state.entities:
            if name in memory.lost or not self._unseen(name):
                continue
            parent = state.entities[name].parent
            if parent is not None and parent in state.entities and _closed(state.entities[parent]):
                continue  # hidden until its container is opened, which the plan does first
            spots = self._search_spots(state, name)
            if spots and all(s in memory.looked_at for s in spots):
                self._lose(name)

    def _lose(self, name: str) -> None:
        memory = self._memory
        log.debug("expert: %s not found after searching; giving it up", name)
        memory.lost.add(name)
        if memory.committed is not None and name in (memory.committed.obj, memory.committed.receptacle):
            memory.committed = None

    def _last_succeeded(self, request: PlanRequest) -> bool:
        return self._memory.last is not None and request.feedback == "None"

    # ------------------------------------------------------------------------------------ geometry

    def _reachable(self, state: WorldState, name: str) -> bool:
        # The text planning mode states this rule's verdicts in its prompt (homiebot.planner.reach).
        return self._reach.reachable(state, name, self._memory.last)

    def _go_to(self, state: WorldState, name: str, why: str) -> Decision:
        search = self._search_spot(state, name)
        if search is not None:
            return search
        kind = state.entities[name].kind
        model = NAV_OBJECT_MODEL if kind is EntityKind.OBJECT else NAV_ROOM_MODEL
        return Decision(Subtask("Go to", name), model, f"so I should go to {_article_name(name)} {why}")

    def _approach(self, state: WorldState, name: str, action: Decision, why: str) -> Decision:
        """Go to ``name`` first when it is out of reach, else do ``action``."""
        search = self._search_spot(state, name)
        if search is not None:
            return search
        if self._reachable(state, name):
            return action
        return self._go_to(state, name, why)

    def _search_spots(self, state: WorldState | None, name: str) -> list[str]:
        """Where ``name`` can be seen from, in search order: its receptacle, then its room (with perception,
        only places perception knows: the way there must be nameable)."""
        if state is None or (entity := state.entities.get(name)) is None:
            return []
        spots = dict.fromkeys(s for s in (entity.parent, entity.room) if s and s != name and s in state.entities)
        return [s for s in spots if not self._unseen(s)]

    def _search_spot(self, state: WorldState, name: str) -> Decision | None:
        """Go where ``name`` can be seen when perception has not seen it: after an F2 on it (its receptacle
        first, its room after a second F2), or, with perception's names, while it is not among them (one spot
        after another). None when there is nowhere left to look, or the robot just went (try the subtask)."""
        memory = self._memory
        spots = self._search_spots(state, name)
        if self._unseen(name):
            # Places perception knows and the robot has not looked from yet (the receptacle may become known at
            # the room).
            left = [s for s in spots if s not in memory.looked_at]
            if not left:
                return None
            spot = left[0]
        else:
            misses = memory.unfound.get(name, 0)
            if misses == 0 or misses > len(spots):
                return None
            spot = spots[misses - 1]
            last = memory.last
            if last is not None and Action.parse(last.action) is Action.GO_TO and last.target == spot:
                return None  # arrived where it should be visible: try the subtask again
        model = NAV_OBJECT_MODEL if state.entities[spot].kind is EntityKind.OBJECT else NAV_ROOM_MODEL
        return Decision(
            Subtask("Go to", spot), model,
            f"since I cant find the {name} in my sight yet, I should go to {_article_name(spot)} to look for it",
        )

    # ------------------------------------------------------------------------------------ the plan

    def _decide(self, state: WorldState, goal: GoalSpec, scene: SceneSpec | None, rounds_left: int) -> Decision:
        memory = self._memory
        initial = memory.initial
        assert initial is not None
        ents = state.entities
        held = state.held
        moves = self._pending_moves(goal, initial, state, scene)

        if memory.detour is not None:
            failing, memory.detour = memory.detour, None
            detour = self._detour(state, failing)
            if detour is not None:
                return detour

        # --- holding something: deliver it, or make the hand free
        if held is not None and memory.hand_unusable:
            # The executor's inventory says the hand is empty: no Put can succeed, nor a Pick (module docstring).
            return self._finish(goal, initial, state, scene, rounds_left)
        if held is None:
            memory.regrasp.clear()  # put down (or dropped): the next Pick is the fresh grasp
        elif held in memory.regrasp:
            move = next((m for m in moves if m.obj == held), None)
            spot = self._parking_spot(held, goal, initial, state, scene, avoid=move.receptacle if move else None)
            if spot is not None:
                put = Decision(Subtask("Put", held, spot), GRASP_MODEL,
                               f"since I cant put the {held} down the way I hold it, I should put it "
                               f"{self._preposition(spot, scene)} {_article_name(spot)} and take it again")
                return self._approach(state, spot, put, f"to put the {held} down")
        if held is not None:
            move = next((m for m in moves if m.obj == held), None)
            if move is None and self._wanted_in_hand(goal, initial, state, held) and not self._hand_work_left(
                goal, initial, state, moves
            ):
                return self._finish(goal, initial, state, scene, rounds_left)
            if move is not None and not _closed(ents[move.receptacle]):
                memory.committed = move
                put = Decision(
                    Subtask("Put", held, move.receptacle),
                    GRASP_MODEL,
                    f"so I should put the {held} {self._preposition(move.receptacle, scene)} "
                    f"{_article_name(move.receptacle)} next",
                )
                return self._approach(state, move.receptacle, put, f"to put the {held} down")
            # The destination is closed (I cannot open while holding) or nothing needs this object:
            # put it on a free surface first.
            spot = self._parking_spot(held, goal, initial, state, scene, avoid=move.receptacle if move else None)
            if spot is None:
                return self._finish(goal, initial, state, scene, rounds_left)
            why = (
                f"since the {move.receptacle} is closed and I cant open it while holding the {held}, "
                f"I should put the {held} {self._preposition(spot, scene)} {_article_name(spot)} first"
                if move is not None
                else f"the {held} is not needed for my task, so I should put it {self._preposition(spot, scene)} "
                f"{_article_name(spot)}"
            )
            put = Decision(Subtask("Put", held, spot), GRASP_MODEL, why)
            return self._approach(state, spot, put, f"to put the {held} down")

        # --- hand empty
        for cond in goal.all:
            if (
                isinstance(cond, Inspected)
                and cond.furniture not in memory.seen_open
                and cond.furniture not in memory.lost
                and _closed(ents[cond.furniture])
                and ents[cond.furniture].interactive
            ):
                return self._open(state, cond.furniture, f"to check what is in {_article_name(cond.furniture)}")

        if moves:
            move = memory.committed if memory.committed in moves else moves[0]
            memory.committed = move
            source = ents[move.obj].parent
            if source is not None and _closed(ents[source]) and ents[source].interactive:
                return self._open(state, source, f"because the {move.obj} is inside it")
            if _closed(ents[move.receptacle]) and ents[move.receptacle].interactive:
                return self._open(
                    state,
                    move.receptacle,
                    f"before I pick the {move.obj}, because I cant open it while holding something",
                )
            pick = Decision(Subtask("Pick", move.obj), GRASP_MODEL, f"so I should pick the {move.obj} next")
            return self._approach(state, move.obj, pick, f"to pick the {move.obj}")
        memory.committed = None
        return self._finish(goal, initial, state, scene, rounds_left)

    def _finish(
        self, goal: GoalSpec, initial: WorldState, state: WorldState, scene: SceneSpec | None, rounds_left: int
    ) -> Decision:
        """Everything after the object moves: articulation goals, closing, holding, robot room, End."""
        ents = state.entities
        held = state.held
        wanted_open = {c.furniture for c in goal.all if isinstance(c, Articulation) and c.state == "open"}
        if held is None:
            for cond in goal.all:
                if (
                    isinstance(cond, Articulation)
                    and cond.furniture not in self._memory.lost
                    and not condition_holds(cond, initial, state)
                ):
                    if cond.state == "open":
                        return self._open(state, cond.furniture, "as my task asks for it to be open")
                    return self._close(state, cond.furniture, "as my task asks for it to be closed")
            if self.close_opened:
                opened = sorted(
                    (
                        n
                        for n, e in ents.items()
                        if e.is_open and initial.entities[n].is_open is False and n not in wanted_open and e.interactive
                    ),
                    key=self._tie,
                )
                if opened:
                    name = opened[0]
                    steps = (0 if self._reachable(state, name) else 1) + 1 + self._tail_rounds(goal, initial, state)
                    if steps <= rounds_left:
                        return self._close(state, name, "since I opened it and its better to close it")
            for cond in goal.all:
                if isinstance(cond, Holding) and not condition_holds(cond, initial, state):
                    candidates = [
                        n for n in select(cond, initial, state)
                        if n not in self._memory.set_aside and n not in self._memory.lost
                    ]
                    if candidates:
                        obj = min(candidates, key=lambda n: (self._robot_nearness(state, n), self._tie(n)))
                        source = ents[obj].parent
                        if source is not None and _closed(ents[source]) and ents[source].interactive:
                            return self._open(state, source, f"because the {obj} is inside it")
                        pick = Decision(Subtask("Pick", obj), GRASP_MODEL, f"so I should pick the {obj} and keep it")
                        return self._approach(state, obj, pick, f"to pick the {obj}")
        for cond in goal.all:
            if isinstance(cond, RobotIn) and not condition_holds(cond, initial, state):
                room = self._room_named(state, cond.room)
                if room is not None and room not in self._memory.given_up:
                    return self._go_to(state, room, "as my task asks me to be there")
        unmet = [c for c in goal.all if not condition_holds(c, initial, state, self._memory.seen_open)]
        impossible = [c.furniture for c in unmet if isinstance(c, PoweredOff)]
        if impossible:
            note = (
                f"no action in my action list can switch off {', '.join(_article_name(n) for n in impossible)}, "
                "so there is nothing more I can do and its time to end"
            )
        elif unmet:
            note = "I cant find anything more I can do for my task, so its time to end"
        else:
            note = "I have finally finished the task and its time to end"
        # EMMOE's data writes the model of [End] as "None" (appendix F.1).
        return Decision(Subtask("End"), "None", f"so according to the historical execution and final task, {note}")

    def _tail_rounds(self, goal: GoalSpec, initial: WorldState, state: WorldState) -> int:
        """Rounds still needed after closing: holding pick (2), room (1), End (1)."""
        rounds = 1
        for cond in goal.all:
            if isinstance(cond, Holding) and not condition_holds(cond, initial, state):
                rounds += 2
            if isinstance(cond, RobotIn) and not condition_holds(cond, initial, state):
                rounds += 1
        return rounds

    def _open(self, state: WorldState, name: str, why: str) -> Decision:
        action = Decision(Subtask("Open", name), ARTICULATION_MODEL, f"so I should open {_article_name(name)} {why}")
        return self._approach(state, name, action, f"and open it {why}")

    def _close(self, state: WorldState, name: str, why: str) -> Decision:
        action = Decision(Subtask("Close", name), ARTICULATION_MODEL, f"so I should close {_article_name(name)} {why}")
        return self._approach(state, name, action, f"and close it {why}")

    # ------------------------------------------------------------------------------------ goal analysis

    def _pending_moves(
        self, goal: GoalSpec, initial: WorldState, state: WorldState, scene: SceneSpec | None
    ) -> list[Move]:
        """The object moves the goal still needs, in a stable order, each object at most once."""
        ents = state.entities
        memory = self._memory
        claimed: set[str] = set()
        moves: list[Move] = []
        # Lost objects and receptacles (searched for, never seen) are not chosen: the work is impossible.
        locked = self._locked_objects(goal, initial, state) | memory.lost

        def order(names: Iterable[str], receptacle: str) -> list[str]:
            dest = ents[receptacle].position

            def key(n: str) -> tuple:
                e = ents[n]
                parent = ents.get(e.parent) if e.parent else None
                in_closed = parent is not None and _closed(parent)
                return (n != state.held, n in memory.set_aside, in_closed, self._move_nearness(state, n, dest),
                        self._tie(n))

            return sorted(names, key=key)

        def add(obj: str, relation: str, receptacle: str) -> None:
            claimed.add(obj)
            if receptacle not in memory.lost:
                moves.append(Move(obj, relation, receptacle))

        for cond in goal.all:
            if isinstance(cond, Placed):
                chosen = select(cond, initial, state)
                placed = [n for n in chosen if is_at(ents[n], cond.relation, cond.receptacle)]
                free = [n for n in chosen if n not in placed and n not in claimed and n not in locked]
                if cond.distinct:
                    # "Three different kinds of fruit": only a category not yet placed (or already chosen) counts.
                    kinds = {ents[n].category for n in placed}
                    for obj in order(free, cond.receptacle):
                        if len(kinds) >= cond.count:
                            break
                        if ents[obj].category not in kinds:
                            kinds.add(ents[obj].category)
                            add(obj, cond.relation, cond.receptacle)
                    continue
                needed = (len(chosen) - len(placed)) if cond.all else max(0, cond.count - len(placed))
                for obj in order(free, cond.receptacle)[:needed]:
                    add(obj, cond.relation, cond.receptacle)
            elif isinstance(cond, Count):
                chosen = select(cond, initial, state)
                placed = [n for n in chosen if is_at(ents[n], cond.relation, cond.receptacle)]
                if len(placed) < cond.equals:
                    free = [n for n in chosen if n not in placed and n not in claimed and n not in locked]
                    for obj in order(free, cond.receptacle)[: cond.equals - len(placed)]:
                        add(obj, cond.relation, cond.receptacle)
                elif len(placed) > cond.equals:
                    surplus = [n for n in placed if n not in claimed]
                    for obj in sorted(surplus, key=self._tie)[: len(placed) - cond.equals]:
                        dest = self._destination_elsewhere(obj, cond.receptacle, goal, initial, state, scene)
                        if dest is not None:
                            add(obj, dest[0], dest[1])
            elif isinstance(cond, Cleared):
                left = sorted(
                    (
                        n
                        for n, e in ents.items()
                        if e.kind is EntityKind.OBJECT
                        and e.parent == cond.receptacle
                        and n not in memory.lost
                        and not any(_category_match(e, c) for c in cond.except_)
                    ),
                    key=self._tie,
                )
                for obj in left:
                    if obj in claimed:
                        continue
                    dest = self._destination_elsewhere(obj, cond.receptacle, goal, initial, state, scene)
                    if dest is not None:
                        add(obj, dest[0], dest[1])
        if state.held is not None:
            moves.sort(key=lambda m: m.obj != state.held)
        return moves

    def _move_nearness(self, state: WorldState, obj: str, destination: tuple[float, float, float]) -> float:
        """How near ``obj`` is to where it must go, to order the objects of a move (smaller first): the squared
        horizontal gap (rounded to mm^2, so that float noise does not reorder equals)."""
        position = state.entities[obj].position
        return round((position[0] - destination[0]) ** 2 + (position[1] - destination[1]) ** 2, 3)

    def _robot_nearness(self, state: WorldState, name: str) -> float:
        """How near ``name`` is to the robot, to choose among candidates (smaller first): its reach distance."""
        return state.reach_distance(name)

    def _locked_objects(self, goal: GoalSpec, initial: WorldState, state: WorldState) -> set[str]:
        """Objects that already sit where some placed/count condition wants them."""
        locked: set[str] = set()
        for cond in goal.all:
            if isinstance(cond, (Placed, Count)):
                for n in select(cond, initial, state):
                    if is_at(state.entities[n], cond.relation, cond.receptacle):
                        locked.add(n)
        return locked

    def _destination_elsewhere(
        self, obj: str, away_from: str, goal: GoalSpec, initial: WorldState, state: WorldState, scene: SceneSpec | None
    ) -> tuple[str, str] | None:
        """Where an object that must leave ``away_from`` should go: a placed condition that wants it, else
        the nearest surface no condition mentions."""
        for cond in goal.all:
            if isinstance(cond, Placed) and cond.receptacle != away_from and obj in select(cond, initial, state):
                return cond.relation, cond.receptacle
        spot = self._dump_surface(goal, state, scene, near=away_from, exclude={away_from})
        if spot is None:
            return None
        return self._relation_for(spot, scene), spot

    # ------------------------------------------------------------------------------------ receptacles

    def _mentioned(self, goal: GoalSpec) -> set[str]:
        names: set[str] = set()
        for cond in goal.all:
            for attr in ("receptacle", "furniture", "from_"):
                value = getattr(cond, attr, None)
                if value:
                    names.add(value)
        return names

    def _surfaces(self, state: WorldState, scene: SceneSpec | None) -> list[str]:
        """Furniture an object can be put on (from the scene spec; without it, furniture holding objects "on")."""
        if scene is not None:
            # Surfaces that take objects "on" them: an articulated furniture takes them in its interior instead.
            return [
                f.name
                for f in scene.furniture
                if f.surfaces and f.articulation is None and f.name in state.entities
            ]
        initial = self._memory.initial
        seen = list(state.entities.values()) + (list(initial.entities.values()) if initial else [])
        return sorted({e.parent for e in seen if e.relation == "on" and e.parent and e.parent in state.entities})

    def _dump_surface(
        self, goal: GoalSpec, state: WorldState, scene: SceneSpec | None, near: str, exclude: set[str]
    ) -> str | None:
        mentioned = self._mentioned(goal)
        candidates = [
            n
            for n in self._surfaces(state, scene)
            if n not in mentioned and n not in exclude and not _closed(state.entities[n])
        ]
        if not candidates:
            return None
        anchor = state.entities[near].position
        return min(
            candidates,
            key=lambda n: (
                (state.entities[n].position[0] - anchor[0]) ** 2 + (state.entities[n].position[1] - anchor[1]) ** 2,
                self._tie(n),
            ),
        )

    def _parking_spot(
        self, obj: str, goal: GoalSpec, initial: WorldState, state: WorldState, scene: SceneSpec | None, avoid: str | None
    ) -> str | None:
        """A surface to put a held object down on: where it came from when that is harmless, else a free one."""
        mentioned_bad = {
            c.receptacle for c in goal.all if isinstance(c, (Cleared, Count))
        }  # putting things back there would undo work
        origin = initial.entities[obj].parent if obj in initial.entities else None
        surfaces = set(self._surfaces(state, scene))
        if (
            origin is not None
            and origin != avoid
            and origin in surfaces
            and origin not in mentioned_bad
            and not _closed(state.entities[origin])
        ):
            return origin
        near = avoid if avoid is not None else min(
            surfaces, key=lambda n: (self._robot_nearness(state, n), self._tie(n)), default=None
        )
        if near is None:
            return None
        exclude = {avoid} if avoid else set()
        return self._dump_surface(goal, state, scene, near=near, exclude=exclude | mentioned_bad)

    def _relation_for(self, furniture: str, scene: SceneSpec | None) -> str:
        """The embedded simulator's put rule: articulated with an interior -> in; a surface -> on; else in."""
        if scene is not None:
            try:
                spec = scene.furniture_by_name(furniture)
            except KeyError:
                return "on"
            if spec.articulation is not None and spec.interior is not None:
                return "in"
            return "on" if spec.surfaces else ("in" if spec.interior is not None else "on")
        # Without the spec, an articulated furniture (fridge, drawer, cabinet) is taken to have an interior.
        return "in" if self._articulated.get(furniture, False) else "on"

    def _preposition(self, furniture: str, scene: SceneSpec | None) -> str:
        return "into" if self._relation_for(furniture, scene) == "in" else "on"

    def _wanted_in_hand(self, goal: GoalSpec, initial: WorldState, state: WorldState, held: str) -> bool:
        return any(isinstance(c, Holding) and held in select(c, initial, state) for c in goal.all)

    def _hand_work_left(self, goal: GoalSpec, initial: WorldState, state: WorldState, moves: Sequence[Move]) -> bool:
        """Whether something still needs a free hand (a move, an open/close)."""
        if moves:
            return True
        for cond in goal.all:
            if isinstance(cond, Articulation) and not condition_holds(cond, initial, state):
                return True
            if isinstance(cond, Inspected) and cond.furniture not in self._memory.seen_open:
                return True
        return False

    def _room_named(self, state: WorldState, name: str) -> str | None:
        rooms = [
            e
            for e in state.entities.values()
            if e.kind is EntityKind.ROOM and (e.name == name or name in e.aliases)  # the robot_in check's rule
        ]
        if not rooms:
            return None
        return min(rooms, key=lambda e: (state.reach_distance(e.name), e.name)).name

    # ------------------------------------------------------------------------------------ analysis text

    def _summary(self, request: PlanRequest, state: WorldState, scene: SceneSpec | None) -> str:
        """First half of the Analysis: what the last round did, in the EMMOE data's words."""
        last = self._memory.last
        if last is None:
            return "According to my final task"
        action = Action.parse(last.action)
        if request.feedback != "None":
            return f"I failed to {_phrase(last, self._preposition(last.place or '', scene))} and the feedback says: {request.feedback.rstrip('.!')}"
        if action is Action.GO_TO:
            return f"I successfully arrived {_article_name(last.target or '')}"
        if action is Action.PICK:
            return f"I successfully picked the {last.target}"
        if action is Action.PUT:
            return f"I successfully put the {last.target} {self._preposition(last.place or '', scene)} the {last.place}"
        if action is Action.OPEN:
            inside = state.objects_in(last.target or "")
            seen = f" and I find {', '.join(inside)} in it" if inside else " and I find nothing in it"
            return f"I successfully opened the {last.target}{seen}"
        if action is Action.CLOSE:
            return f"I successfully closed the {last.target}"
        return "According to my final task"


def _phrase(subtask: Subtask, preposition: str = "on") -> str:
    action = Action.parse(subtask.action)
    if action is Action.PUT:
        return f"put the {subtask.target} {preposition} the {subtask.place}"
    word = action.value.lower() if action else subtask.action.lower()
    return f"{word} the {subtask.target}" if subtask.target else word


def _category_match(entity: EntityState, category: str) -> bool:
    return matches_category(entity, category)

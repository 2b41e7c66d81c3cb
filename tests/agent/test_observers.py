"""Episode observers: the loop calls on_start / on_round / on_end with the states the contract names, in both
wirings (in-process ``run_episode`` and the graph's ``run_over_backend``), and an observer that raises aborts."""

from __future__ import annotations

import pytest

from homiebot.agent.loop import EpisodeConfig, run_episode, run_over_backend
from homiebot.agent.observers import EpisodeObserver, ObserverBase, StateRecorder
from homiebot.executor.executor import Executor
from homiebot.planner.expert import ExpertPlanner
from homiebot.ros.episode import ExecutionOutcome, round_signature
from homiebot.tasks.goals import GoalSpec
from homiebot.tasks.suite import TaskSpec
from homiebot.testing.fake_world import FakeWorld, kitchen_world
from homiebot.types import Observation, RoundRecord, Trajectory, WorldState


def drawer_task() -> TaskSpec:
    goal = GoalSpec.model_validate({"all": [
        {"type": "inspected", "furniture": "kitchen_drawer"},
        {"type": "placed", "category": "short_can", "relation": "in", "receptacle": "kitchen_drawer"},
    ]})
    return TaskSpec(id="t-obs", instruction="put a short can into the kitchen drawer", scene="fake",
                    attributes=["short-horizon"], keypaths=[["[End]"]], goal=goal)


class CallLog(ObserverBase):
    """Every call with what it got, and the world as it really was at that moment."""

    def __init__(self, world: FakeWorld) -> None:
        self.world = world
        self.calls: list[tuple[str, object]] = []

    def on_start(self, trajectory: Trajectory, state: WorldState, observation: Observation | None) -> None:
        assert state == self.world.state()
        self.calls.append(("start", observation))

    def on_round(self, record: RoundRecord, seen: Observation | None, state: WorldState) -> None:
        # The state is the one after this round's execution: the simulator's state now.
        assert state == self.world.state()
        self.calls.append(("round", (record.index, record.subtask_text, seen)))

    def on_end(self, trajectory: Trajectory, state: WorldState | None) -> None:
        assert trajectory.goal_satisfied is not None  # the goal check is done before on_end
        self.calls.append(("end", state))


class FakeWorldBackend:
    """The graph wiring's backend over the FakeWorld and the core executor (no ROS)."""

    def __init__(self, world: FakeWorld) -> None:
        self.world = world
        self.executor = Executor(world)

    def reset(self, scene: str, seed: int):
        self.world.reset(scene, seed=seed)
        return self.world.state(), self.world.scene_spec()

    def render(self):
        return self.world.observe().images()

    def observe(self):
        return self.world.observe()

    def state(self):
        return self.world.state()

    def execute(self, subtask, model, inventory, round_index):
        report = self.executor.execute_detailed(subtask, model, inventory)
        return ExecutionOutcome(report.feedback, report.path_length, dict(report.timings))


def test_observer_protocol_is_met_by_the_base_and_the_state_recorder():
    assert isinstance(ObserverBase(), EpisodeObserver)
    assert isinstance(StateRecorder(), EpisodeObserver)


@pytest.mark.parametrize("wiring", ["in-process", "graph"])
def test_an_observer_sees_every_rounds_state_in_both_wirings(wiring):
    task = drawer_task()
    world = FakeWorld(kitchen_world())
    log, states = CallLog(world), StateRecorder()
    config = EpisodeConfig(render=False)
    if wiring == "in-process":
        trajectory = run_episode(world, ExpertPlanner(), task=task, config=config, observers=[log, states])
    else:
        trajectory = run_over_backend(FakeWorldBackend(world), ExpertPlanner(), task=task, config=config,
                                      observers=[log, states]).trajectory
    assert trajectory.goal_satisfied is True and trajectory.error is None
    kinds = [kind for kind, _ in log.calls]
    assert kinds == ["start"] + ["round"] * len(trajectory.rounds) + ["end"]
    assert [got[:2] for kind, got in log.calls if kind == "round"] == [
        (r.index, r.subtask_text) for r in trajectory.rounds]
    # One state per round plus the start; the drawer is open after round 2 and the can inside at the end.
    assert len(states.states) == len(trajectory.rounds) + 1
    assert not states.states[0].entities["kitchen_drawer"].is_open
    assert states.states[2].entities["kitchen_drawer"].is_open
    assert states.final == states.states[-1] == world.state()
    assert states.final.entities["short_can"].parent == "kitchen_drawer"


def test_both_wirings_give_observers_the_same_states():
    task = drawer_task()
    recorded = {}
    for wiring in ("in-process", "graph"):
        world, states = FakeWorld(kitchen_world()), StateRecorder()
        config = EpisodeConfig(render=False)
        if wiring == "in-process":
            trajectory = run_episode(world, ExpertPlanner(), task=task, config=config, observers=[states])
        else:
            trajectory = run_over_backend(FakeWorldBackend(world), ExpertPlanner(), task=task, config=config,
                                          observers=[states]).trajectory
        recorded[wiring] = (round_signature(trajectory), states.states, states.final)
    assert recorded["in-process"] == recorded["graph"]


def test_the_views_an_observer_gets_are_the_ones_the_planner_saw():
    task = drawer_task()
    world = FakeWorld(kitchen_world())
    seen_by_planner: list[Observation | None] = []

    class Remembering(ExpertPlanner):
        def plan(self, request):
            seen_by_planner.append(request.observation)
            return super().plan(request)

    log = CallLog(world)
    run_episode(world, Remembering(), task=task, observers=[log])
    views = [got[2] for kind, got in log.calls if kind == "round"]
    assert views and all(v is not None for v in views)
    assert all(a is b for a, b in zip(views, seen_by_planner, strict=True))
    assert log.calls[0][1] is seen_by_planner[0]


def test_an_observer_that_raises_aborts_the_episode():
    class Broken(ObserverBase):
        def on_round(self, record, seen, state):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_episode(FakeWorld(kitchen_world()), ExpertPlanner(), task=drawer_task(), observers=[Broken()])


def test_a_failed_reset_ends_observers_with_no_state():
    class NoScene(FakeWorld):
        def reset(self, scene, seed=0):
            if scene != "fake":
                raise FileNotFoundError(f"no such scene: {scene}")
            return super().reset(scene, seed)

    states = StateRecorder()
    ended: list[WorldState | None] = []

    class End(ObserverBase):
        def on_end(self, trajectory, state):
            ended.append(state)

    task = drawer_task()
    trajectory = run_episode(NoScene(kitchen_world()), ExpertPlanner(), task=task, scene="attic",
                             observers=[states, End()])
    assert trajectory.error and "reset failed" in trajectory.error
    assert ended == [None] and states.states == []

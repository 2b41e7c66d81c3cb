"""The episode loop on the FakeWorld: case 1 replay, expert episodes, determinism, failures that do not crash."""

from __future__ import annotations

import pytest

from homiebot.agent.loop import EpisodeConfig, EpisodeSetupError, run_episode
from homiebot.planner.base import Planner, PlanRequest
from homiebot.planner.expert import ExpertPlanner
from homiebot.planner.scripted import ScriptedPlanner
from homiebot.tasks.goals import GoalSpec
from homiebot.tasks.suite import TaskSpec
from homiebot.testing.case_studies import CASE1_ROUNDS, CASE1_TASK, case1_outputs
from homiebot.testing.fake_world import FakeWorld, kitchen_world
from homiebot.types import ErrorCode, Pose2D


def make_task(goal: dict, instruction: str = "do it", task_id: str = "t-1") -> TaskSpec:
    return TaskSpec(id=task_id, instruction=instruction, scene="fake", attributes=["short-horizon"],
                    keypaths=[["[End]"]], goal=GoalSpec.model_validate(goal))


def test_case1_replay_gives_the_papers_feedback_in_order():
    world = FakeWorld(kitchen_world())
    traj = run_episode(world, ScriptedPlanner(case1_outputs()), instruction=CASE1_TASK, scene="fake")
    assert [r.feedback.message for r in traj.rounds] == [fb for *_, fb in CASE1_ROUNDS]
    assert [" ".join(r.feedback.inventory) or "None" for r in traj.rounds] == [inv for *_, inv, _ in CASE1_ROUNDS]
    assert [r.feedback.code for r in traj.rounds][3:5] == [ErrorCode.L3, ErrorCode.L1]
    assert traj.ended and len(traj.rounds) == 15
    assert world.entities["green_can"].parent == "fridge"


def test_expert_drawer_task_like_appendix_B():
    task = make_task({"all": [
        {"type": "inspected", "furniture": "kitchen_drawer"},
        {"type": "placed", "category": "short_can", "relation": "in", "receptacle": "kitchen_drawer"},
    ]}, "check if there are anything in the kitchen drawer, if its empty put a short can into it")
    world = FakeWorld(kitchen_world())
    traj = run_episode(world, ExpertPlanner(), task=task)
    assert traj.goal_satisfied and traj.ended and traj.error is None
    assert [r.subtask_text for r in traj.rounds] == [
        "[Go to, kitchen_drawer]", "[Open, kitchen_drawer]", "[Go to, short_can]", "[Pick, short_can]",
        "[Go to, kitchen_drawer]", "[Put, short_can, kitchen_drawer]", "[Close, kitchen_drawer]", "[End]",
    ]
    assert [r.output.model for r in traj.rounds] == ["NoMaD", "octo", "PixNav", "RT-1-X", "NoMaD", "RT-1-X", "octo", "None"]
    assert all(r.feedback.code is ErrorCode.OK for r in traj.rounds)
    assert all(r.output.analysis for r in traj.rounds)


def test_expert_opens_fridge_before_picking_and_closes_it():
    task = make_task({"all": [{"type": "placed", "object": "green_can", "relation": "in", "receptacle": "fridge"}]})
    traj = run_episode(FakeWorld(kitchen_world()), ExpertPlanner(), task=task)
    texts = [r.subtask_text for r in traj.rounds]
    assert texts.index("[Open, fridge]") < texts.index("[Pick, green_can]")
    assert texts[-2:] == ["[Close, fridge]", "[End]"]
    assert traj.goal_satisfied


def test_same_seed_same_trajectory():
    task = make_task({"all": [{"type": "placed", "object": "apple", "relation": "on", "receptacle": "brown_table"}]})

    def once():
        traj = run_episode(FakeWorld(kitchen_world()), ExpertPlanner(), task=task, seed=3)
        return [(r.output.raw, r.feedback) for r in traj.rounds]

    assert once() == once()


class Exploding(Planner):
    name = "exploding"

    def plan(self, request: PlanRequest) -> str:
        if request.round_index == 2:
            raise ConnectionError("model server went away")
        return "Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD"


def test_planner_exception_stops_episode_with_error_not_crash():
    traj = run_episode(FakeWorld(), Exploding(), instruction="x", scene="fake")
    assert len(traj.rounds) == 1
    assert traj.error == "planner 'exploding' failed in round 2: model server went away"


def test_free_text_with_expert_is_refused():
    with pytest.raises(EpisodeSetupError, match="needs a task"):
        run_episode(FakeWorld(), ExpertPlanner(), instruction="tidy up", scene="fake")


def test_round_limit_and_no_render():
    planner = ScriptedPlanner(["Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD"] * 30)
    traj = run_episode(FakeWorld(), planner, instruction="x", scene="fake", config=EpisodeConfig(render=False))
    assert len(traj.rounds) == 20 and not traj.ended
    assert all(len(r.images) == 0 for r in planner.requests)


class ScriptThenExpert(Planner):
    """Replays the first rounds of a script, then lets the expert take over (how DPO data re-plans)."""

    name = "script-then-expert"
    privileged = True
    accepts_free_text = False

    def __init__(self, outputs):
        self.script = ScriptedPlanner(outputs)
        self.expert = ExpertPlanner()

    def reset(self, task, seed=0):
        self.script.reset(task, seed)
        self.expert.reset(task, seed)

    def plan(self, request):
        if request.round_index <= len(self.script.outputs):
            self.expert.plan(request)  # keep the expert's memory in step (initial state, seen furniture)
            return self.script.plan(request)
        return self.expert.plan(request)


def test_expert_replans_after_L3_and_L1_like_appendix_I_case_1():
    task = make_task({"all": [{"type": "placed", "object": "green_can", "relation": "in", "receptacle": "fridge"}]},
                     CASE1_TASK)
    planner = ScriptThenExpert(case1_outputs()[:5])  # the paper's first five rounds: ... L3, L1
    traj = run_episode(FakeWorld(kitchen_world()), planner, task=task)
    assert [r.subtask_text for r in traj.rounds] == [s for _, s, *_ in CASE1_ROUNDS]
    assert [r.feedback.message for r in traj.rounds] == [fb for *_, fb in CASE1_ROUNDS]
    assert traj.goal_satisfied
    assert "fridge is closed" in traj.rounds[5].output.analysis or "hand is full" in traj.rounds[5].output.analysis


def test_simulator_exception_stops_episode_with_error(tmp_path):
    from homiebot.data.record import EpisodeRecorder, read_summary

    world = FakeWorld()
    calls = {"n": 0}
    real_observe = world.observe

    def flaky_observe():
        calls["n"] += 1
        if calls["n"] == 3:  # reset, after round 1, after round 2 <- fails
            raise RuntimeError("EGL context lost")
        return real_observe()

    world.observe = flaky_observe
    planner = ScriptedPlanner(["Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD"] * 5)
    traj = run_episode(world, planner, instruction="x", scene="fake", recorder=EpisodeRecorder(tmp_path / "ep"))
    assert len(traj.rounds) == 2 and traj.error == "simulator failed after round 2: EGL context lost"
    assert read_summary(tmp_path / "ep")["error"] == traj.error


class RecordingPerception:
    """A perception hook that knows only what it was told: names it saw, actions recorded."""

    describes_world = True

    def __init__(self, spec, state):
        self.seen: set[str] = set()
        self.calls: list[str] = []

    def observe(self, observation, state):
        self.calls.append("observe")
        # "sees" every room and furniture, and the objects on furniture within 1 m of the robot
        self.seen |= {n for n, e in state.entities.items() if e.kind.value in ("furniture", "room")}
        self.seen |= {n for n, e in state.entities.items()
                      if e.kind.value == "object" and e.parent and state.reach_distance(e.parent) <= 1.0}

    def record_action(self, action, target, place=None, state=None):
        self.calls.append(f"record {action.value} {target}")

    def describe(self):
        return "seen: " + ", ".join(sorted(self.seen))

    def observed_targets(self):
        return tuple(sorted(self.seen))

    def perceived_names(self, state):
        return None  # it knows instances by the simulator's names

    def world_graph_json(self):
        return None  # it keeps no graph

    def perceived_state(self, state):
        return None  # it keeps no geometry

    def grounder(self):
        from homiebot.perception.grounding import AliasGrounder, GroundingResult

        hook, inner = self, AliasGrounder()

        class Seen:
            def ground(self, target, state):
                result = inner.ground(target, state)
                return result if result.instance in hook.seen else GroundingResult(None)

        return Seen()


def test_perception_hook_grounds_describes_and_observes():
    hooks = []

    def factory(spec, state):
        hooks.append(RecordingPerception(spec, state))
        return hooks[-1]

    planner = ScriptedPlanner([
        "Analysis: a\nSubtask: [Go to, fridge]\nModel: NoMaD",
        "Analysis: b\nSubtask: [Go to, green_can]\nModel: PixNav",  # an object perception has not seen: F2
        "Analysis: c\nSubtask: [Open, fridge]\nModel: octo",
    ])
    world = FakeWorld(robot=Pose2D(9.0, 1.0, 0.0))  # in the living room: the can on the table is out of sight
    traj = run_episode(world, planner, instruction="x", scene="fake", perception=factory)
    hook = hooks[0]
    assert [r.feedback.code for r in traj.rounds[:3]] == [ErrorCode.OK, ErrorCode.F2, ErrorCode.OK]
    assert "fridge" in planner.requests[0].grounded_targets and "green_can" not in planner.requests[0].grounded_targets
    assert planner.requests[0].world_description.startswith("seen: ")
    assert hook.calls[:4] == ["observe", "record Go to fridge", "observe", "observe"]
    assert "record Open fridge" in hook.calls


def test_expert_searches_after_F2_from_a_perception_that_has_not_seen_the_object():
    task = make_task({"all": [{"type": "placed", "object": "green_can", "relation": "in", "receptacle": "fridge"}]})
    traj = run_episode(FakeWorld(kitchen_world(), robot=Pose2D(9.0, 1.0, 0.0)), ExpertPlanner(), task=task,
                       perception=RecordingPerception)
    texts = [r.subtask_text for r in traj.rounds]
    assert texts[2:5] == ["[Go to, green_can]", "[Go to, brown_table]", "[Pick, green_can]"]
    assert traj.rounds[2].feedback.code is ErrorCode.F2
    assert "cant find the green_can in my sight" in traj.rounds[3].output.analysis
    assert traj.goal_satisfied and traj.ended


class BlindToCans(RecordingPerception):
    """Never sees a can, wherever the robot stands (an object hidden from every view)."""

    def observe(self, observation, state):
        super().observe(observation, state)
        self.seen.discard("green_can")


def test_expert_gives_up_after_searching_everywhere_and_ends():
    task = make_task({"all": [{"type": "placed", "object": "green_can", "relation": "in", "receptacle": "fridge"}]})
    traj = run_episode(FakeWorld(kitchen_world(), robot=Pose2D(9.0, 1.0, 0.0)), ExpertPlanner(), task=task,
                       perception=BlindToCans)
    texts = [r.subtask_text for r in traj.rounds]
    codes = [r.feedback.code for r in traj.rounds]
    # F2; its receptacle (the fake world's only place to look); F2: nowhere left to look; F2 once more: lost,
    # nothing else to do: it closes the fridge it opened and ends (not 20 rounds of F2)
    assert codes.count(ErrorCode.F2) == 3, texts
    assert texts[3] == "[Go to, brown_table]" and texts[-2:] == ["[Close, fridge]", "[End]"], texts
    assert texts[-1] == "[End]" and len(texts) < 12, texts
    assert traj.ended and not traj.goal_satisfied

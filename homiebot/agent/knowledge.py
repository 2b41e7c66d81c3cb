"""What the planner is told about the world besides its images, one object per episode (docs/loop.md).

The loop asks a :class:`WorldKnowledge` for the request's grounded names, world description and (for a
privileged planner) perceived names, feeds it every view it fetches, and tells it which executions
succeeded. Two kinds exist, so the loop has no branch on "is there perception":

* :class:`SegmentationKnowledge` (the default): the names the views' instance segmentation has shown so far
  (privileged panoptic perception), what constrained decoding lets a planner name; no world description.
* :class:`PerceptionKnowledge`: a perception hook such as
  :class:`homiebot.perception.world_model.WorldModel` (a world graph built from the views, PARTNR-style
  text description, grounding through the graph).

This is not an episode observer: observers watch an episode, this shapes the planner's next request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from homiebot.perception.grounding import Grounder
from homiebot.sim.scene import SceneSpec
from homiebot.types import Action, Observation, Subtask, WorldState

#: Pixels an instance needs in one view to count as seen (the random baseline uses the same bar).
VISIBLE_MIN_PIXELS = 20


@runtime_checkable
class PerceptionHook(Protocol):
    """What the loop needs from perception (``homiebot.perception.world_model.WorldModel`` fits): fuse each
    observation, update after successful actions, describe the world, list the grounded names, ground, and
    the names it knows instances by, and its graph for the record. ``describes_world`` declares whether requests
carry its description.
    Every member is required: a hook says "nothing" with None, not by leaving a method out."""

    @property
    def describes_world(self) -> bool: ...

    def observe(self, observation: Observation, state: WorldState) -> Any: ...

    def record_action(self, action: Any, target: str | None, place: str | None = None,
                      state: WorldState | None = None, released_at: tuple[float, float, float] | None = None) -> Any:
        """Update after a successful action; ``released_at``: where a Put's hand let go of the object, passed only
        when known (:meth:`PerceptionKnowledge.after_success`)."""

    def describe(self) -> str: ...

    def observed_targets(self) -> tuple[str, ...]: ...

    def grounder(self) -> Grounder: ...

    def perceived_names(self, state: WorldState) -> Mapping[str, str] | None:
        """Simulator instance -> the name perception knows it by (None: the simulator's own names)."""

    def world_graph_json(self) -> str | None:
        """The world graph now as one line of JSON, for the episode record (None: the hook keeps no graph)."""

    def perceived_state(self, state: WorldState) -> WorldState | None:
        """``state`` with the geometry perception has (where objects and furniture are), for skills that plan
        from it (None: the hook keeps no geometry)."""


#: Builds the episode's perception after the reset: ``(scene spec or None, initial state) -> hook``.
PerceptionFactory = Callable[[SceneSpec | None, WorldState], PerceptionHook]


class WorldKnowledge(Protocol):
    """The planner's knowledge of the world for one episode (see the module docstring)."""

    #: Whether fusing a view costs enough to be timed per round (``perceive_s``).
    perceives: bool

    def see(self, observation: Observation, state: WorldState) -> None:
        """Fuse the views the loop just fetched (the state is the privileged one at that instant)."""

    def after_success(self, grounded: Subtask, state: WorldState,
                      released_at: tuple[float, float, float] | None = None) -> None:
        """A subtask succeeded, grounded to simulator instances; ``state`` is the world after it; ``released_at``,
        a Put's, where the hand let go of the object when the skill knows (``SkillResult.released_at``)."""

    def glance(self, observation: Observation, state: WorldState) -> None:
        """Fuse a look into a container (the head camera's view, :func:`homiebot.agent.looks.look_target`): the
        objects it shows; the furniture stays as the four views built it."""

    def grounded_targets(self) -> tuple[str, ...]:
        """The names the planner may use as targets (constrained decoding)."""

    def world_description(self) -> str | None:
        """A text description of the world for the request, or None."""

    def perceived_names(self, state: WorldState) -> Mapping[str, str] | None:
        """Simulator instance -> the name perception knows it by; None when targets are the simulator's."""


class SegmentationKnowledge:
    """Names the views' instance segmentation has shown, at least :data:`VISIBLE_MIN_PIXELS` in one view."""

    perceives = False

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def see(self, observation: Observation, state: WorldState) -> None:
        self._seen.update(observation.visible_instances(VISIBLE_MIN_PIXELS))

    def after_success(self, grounded: Subtask, state: WorldState,
                      released_at: tuple[float, float, float] | None = None) -> None:
        """Segmentation learns nothing from an action."""

    def glance(self, observation: Observation, state: WorldState) -> None:
        self.see(observation, state)

    def grounded_targets(self) -> tuple[str, ...]:
        return tuple(sorted(self._seen))

    def world_description(self) -> str | None:
        return None

    def perceived_names(self, state: WorldState) -> Mapping[str, str] | None:
        return None


class PerceptionKnowledge:
    """A perception hook's view of the world (a world graph): its names, description and grounding."""

    perceives = True

    def __init__(self, hook: PerceptionHook) -> None:
        self.hook = hook

    def see(self, observation: Observation, state: WorldState) -> None:
        self.hook.observe(observation, state)

    def after_success(self, grounded: Subtask, state: WorldState,
                      released_at: tuple[float, float, float] | None = None) -> None:
        action = Action.parse(grounded.action)
        what = action if action is not None else grounded.action
        if released_at is None:
            self.hook.record_action(what, grounded.target, grounded.place, state)
        else:
            self.hook.record_action(what, grounded.target, grounded.place, state, released_at=released_at)

    def glance(self, observation: Observation, state: WorldState) -> None:
        """The hook's objects-only look where it has one (:meth:`homiebot.perception.world_model.WorldModel.look`),
        else a plain observation."""
        look = getattr(self.hook, "look", None)
        if callable(look):
            look(observation)
        else:
            self.hook.observe(observation, state)

    def grounded_targets(self) -> tuple[str, ...]:
        return self.hook.observed_targets()

    def world_description(self) -> str | None:
        return self.hook.describe() if self.hook.describes_world else None

    def perceived_names(self, state: WorldState) -> Mapping[str, str] | None:
        return self.hook.perceived_names(state)

    def grounder(self) -> Grounder:
        return self.hook.grounder()


#: Builds the episode's knowledge after the reset: ``(scene spec or None, initial state) -> knowledge``.
KnowledgeFactory = Callable[[SceneSpec | None, WorldState], WorldKnowledge]


def segmentation_knowledge(scene: SceneSpec | None, initial: WorldState) -> WorldKnowledge:
    return SegmentationKnowledge()

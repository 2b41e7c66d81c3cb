"""One world graph per agent in a two-agent episode (PARTNR §4.1: decentralized agents each keep their own world
graph; appendix A.7.1: a partial graph grows from what the agent observes, plus deterministic updates after its
own actions).

:func:`homiebot.agent.loop.run_episode` with ``perception=`` and a ``partner`` builds, for each agent, its own
perception hook (a :class:`homiebot.perception.world_model.WorldModel` from the same factory) and wraps it in
:class:`AgentGraphKnowledge`:

* the agent's own views feed it (the loop calls ``see`` with that agent's observation and its point of view of
  the state), and its own successful actions update it; the partner's views and actions do not (the partner's
  actions reach a decentralized planner as text, ``observe_partner``);
* the agent's executor grounds through it (``InProcessBackend.ground_with(grounder, agent)``): naming an object
  only the partner has seen is F2, as for a single agent with perception;
* the description the agent's planner reads speaks as PARTNR's decentralized world description does: what this
  agent holds is ``held by the agent``, what the other holds ``held by the other agent``. The graph builders
  know one agent (the one whose point of view the state is taken from), so the wrapper renames that agent's node
  and moves an object the simulator shows in the partner's hand onto a node for the partner.

What is shared: the scene's rooms and furniture (every graph starts from the layout, as PARTNR's privileged
graphs do) and the simulator's truth the privileged builder reads for what a view shows. Nothing else: an object
one agent saw is unknown to the other until it sees it too. The episode record's ``world_graphs.jsonl`` is the
robot's graph.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from homiebot.agent.knowledge import PerceptionFactory, PerceptionHook, PerceptionKnowledge, WorldKnowledge
from homiebot.perception.world_graph import ROBOT_ID, GraphNode, NodeKind, Relation
from homiebot.perception.world_model import WorldModel
from homiebot.sim.scene import SceneSpec
from homiebot.types import Observation, WorldState

if TYPE_CHECKING:
    from homiebot.agent.in_process import InProcessBackend

log = logging.getLogger(__name__)

#: How an agent's own node and its partner's node are named in its description (PARTNR's decentralized world
#: description: "held by the agent" / "held by the other agent", spec §2.3).
SELF_NAME = "the agent"
PARTNER_NAME = "the other agent"
PARTNER_ID = "other_agent"


class AgentGraphKnowledge(PerceptionKnowledge):
    """One agent's own world graph (module docstring). ``agent``: its name (``robot``, ``human``); ``partner``:
    the other agent's name. A hook that is not a :class:`WorldModel` (keeps no graph the wrapper can read) is
    used as it is."""

    def __init__(self, hook: PerceptionHook, agent: str, partner: str) -> None:
        super().__init__(hook)
        self.agent = agent
        self.partner = partner
        self._named = False

    def see(self, observation: Observation, state: WorldState) -> None:
        self.hook.observe(observation, state)
        self._as_this_agent(state)

    def _as_this_agent(self, state: WorldState) -> None:
        if not isinstance(self.hook, WorldModel):
            return
        graph = self.hook.graph
        if not self._named and graph.has(ROBOT_ID):
            graph.update_node(ROBOT_ID, name=SELF_NAME)
            self._named = True
        other = next((a for a in state.agents if a.name == self.partner), None)
        if other is None:
            return
        if not graph.has(PARTNER_ID):
            graph.add_node(GraphNode(PARTNER_ID, NodeKind.AGENT, self.partner, PARTNER_NAME))
        graph.update_node(PARTNER_ID, position=(other.pose.x, other.pose.y, 0.0))
        room = other.room if other.room and graph.has(other.room) else None
        graph.set_room(PARTNER_ID, room)
        # The builders put every held object in "the" agent's hand (they know one agent); the simulator says the
        # partner holds this one. (The privileged graph keeps the simulator's names as node ids.)
        if other.held is not None and other.held != state.held and graph.has(other.held):
            placement = graph.placement(other.held)
            if placement is not None and placement == (ROBOT_ID, Relation.HELD_BY):
                graph.set_placement(other.held, PARTNER_ID, Relation.HELD_BY)
                graph.set_room(other.held, room)


def agent_knowledge(perception: PerceptionFactory, backend: InProcessBackend, agent_id: int, agent: str,
                    partner: str, hooks: list[PerceptionHook] | None = None
                    ) -> Callable[[SceneSpec | None, WorldState], WorldKnowledge]:
    """The loop's knowledge factory for one agent of a pair: its own hook from ``perception``, wrapped
    (:class:`AgentGraphKnowledge`), and its executor grounding through it. ``hooks``: filled with the hook (the
    record's world-graph file reads the robot's)."""

    def build(scene_spec: SceneSpec | None, initial: WorldState) -> WorldKnowledge:
        hook = perception(scene_spec, initial)
        if hooks is not None:
            hooks[:] = [hook]
        knowledge = AgentGraphKnowledge(hook, agent, partner)
        backend.ground_with(knowledge.grounder(), agent=agent_id)
        log.debug("%s: its own world graph", agent)
        return knowledge

    return build

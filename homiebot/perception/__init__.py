"""Perception: PARTNR's world graph (PARTNR paper, appendix A.7) kept from the four views, and grounding of planner
target strings. Modules (imported on demand; nothing heavy is imported here):

* :mod:`.world_graph` - the versioned graph (house > rooms > furniture > objects/agents), JSON export, text world
  description, observed targets;
* :mod:`.privileged` / :mod:`.conceptgraph` - the two builders (privileged panoptic sensor under partial
  observability; ConceptGraphs-style from RGB-D and class-agnostic masks);
* :mod:`.actions` - deterministic updates after successful actions; :mod:`.relations` - on/in from geometry;
* :mod:`.grounding` - exact tier, EMMOE name map tier, MiniLM tier; :mod:`.emmoe_names` - EMMOE's name map;
* :mod:`.world_model` - the facade an episode loop or the ROS node drives;
* :mod:`.quality` / :mod:`.matching` - quality against ground truth (``homie perception eval``);
  :mod:`.render` - pictures. See ``docs/perception.md``.
"""

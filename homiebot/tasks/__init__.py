"""The task and goal language: what a task asks (:mod:`~homiebot.tasks.suite`: instruction, scene, keypaths, goal;
the built-in suites in ``suites/``), the goal conditions on a world state (:mod:`~homiebot.tasks.goals`), PARTNR's
evaluation functions (:mod:`~homiebot.tasks.partnr`) and ALFWorld's task types (:mod:`~homiebot.tasks.alfred`).

It sits just above :mod:`homiebot.types`: planners, the agent loop, the text world and the evaluation import it, and
it imports none of them (docs/architecture.md, "Layers")."""

"""High-level planning: EMMOE prompt and parser, the ``Planner`` interface and its backends."""

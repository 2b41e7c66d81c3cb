"""Two agents, a robot and a human partner, as in PARTNR (docs/react.md, "Not done"): roles and their tools,
the centralized planner's answer grammar and parser. The simulator's second agent and the paired loop are
not built yet."""

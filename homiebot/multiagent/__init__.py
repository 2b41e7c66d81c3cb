"""Two agents, a robot and a human partner, as in PARTNR (docs/collaboration.md): roles and the centralized answer
grammar (:mod:`.centralized`), the expert pair's proposition split (:mod:`.split`), the pair planners
(:mod:`.pair`, :mod:`.react_pair`), PARTNR's collaboration measures (:mod:`.measures`) and the evaluation behind
``homie eval --agents robot+human`` (:mod:`.evaluate`). The simulator's human is ``MujocoSimulator(human=True)``;
the lock-step rounds are the episode loop's ``partner`` (:class:`homiebot.agent.loop.AgentSlot`)."""

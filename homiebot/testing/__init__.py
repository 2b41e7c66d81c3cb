"""Test doubles and fixtures shared by the test suite and the benchmarks (importable without ``sys.path`` edits).

* :mod:`.fake_world`: :class:`~homiebot.testing.fake_world.FakeWorld`, a state-only simulator for exact-state
  tests of the executor, the session, the loop and the expert (the end-to-end tests use MuJoCo);
* :mod:`.case_studies`: EMMOE appendix I, case 1, as planner answers and the feedback the paper prints.
"""

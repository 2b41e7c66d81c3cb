"""Test doubles and fixtures shared by the test suite and the benchmarks (importable without ``sys.path`` edits).

* :mod:`.fake_world`: :class:`~homiebot.testing.fake_world.FakeWorld`, a state-only simulator for exact-state
  tests of the executor, the session, the loop and the expert (the end-to-end tests use MuJoCo);
* :mod:`.case_studies`: EMMOE appendix I, case 1, as planner answers and the feedback the paper prints;
* :mod:`.paper_examples`: EMMOE appendix C's worked examples as trajectories, for the metric tests;
* :mod:`.plan_requests`: planner requests (four views, an instruction, history turns) for the backend tests;
* :mod:`.synthetic_records`: a record set with EMMOE-100's counts, written by the real recorder (training data);
* :mod:`.foxglove_client`: a client of Foxglove's WebSocket protocol for the live-view tests and benchmark
  (needs the ``live`` extra);
* :mod:`.ros_helpers`: graph environments, topic listeners and a pick episode through the sim bridge for the
  ROS 2 tests (imports rclpy inside the helpers: the module itself loads without ROS 2).
"""

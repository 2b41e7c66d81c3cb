# The README's two commands:
#   make demo   set everything up and run an embedded HomieBot episode (expert planner, MuJoCo)
#   make test   set everything up and run the test suite (what .ci/run calls)
# and, for everyday work:
#   make test-fast   the fast tier (no slow, ROS, model or GPU tests): a few minutes, after the lint gate
#   make lock        refresh locks/*.txt from the venv that passed `make test` (scripts/lock.sh)
VENV ?= .venv
export VENV
HOMIE := $(VENV)/bin/homie
export MUJOCO_GL ?= egl

.PHONY: demo test test-fast setup setup-test lock clean

setup:
	scripts/setup.sh core

setup-test:
	scripts/setup.sh test

demo: setup
	$(HOMIE) run --task emmoe-084 --out runs/demo

test: setup-test
	scripts/run_tests.sh

test-fast: setup-test
	HOMIE_LINT=1 scripts/run_tests.sh -m "not slow and not ros and not models and not gpu" --durations=15

lock:
	scripts/lock.sh

clean:
	rm -rf build install log runs .pytest_cache

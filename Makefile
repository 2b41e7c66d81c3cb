# The README's two commands:
#   make demo   set everything up and run an embedded HomieBot episode (expert planner, MuJoCo)
#   make test   set everything up and run the test suite (what .ci/run calls)
VENV ?= .venv
HOMIE := $(VENV)/bin/homie
export MUJOCO_GL ?= egl

.PHONY: demo test setup setup-test bench clean

setup:
	scripts/setup.sh core

setup-test:
	scripts/setup.sh test

demo: setup
	$(HOMIE) run --task emmoe-084 --out runs/demo

test: setup-test
	scripts/run_tests.sh

bench: setup-test
	$(VENV)/bin/python -m benchmarks.run_all

clean:
	rm -rf build install log runs .pytest_cache

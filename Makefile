# A thin driver over CMake. The two commands of README.md:
#   make run    build, then run the main job
#   make test   build, then run the test suite
# and `make report` (docs/results.md, "The drafter step"): build, then measure the papers' claims here.
# Each installs the Debian packages it needs when run as root (scripts/deps.sh). The report
# runs the configs `make run` tuned (profiles/local.json) where there are any.
BUILD ?= build
TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_ARGS ?=

MODELS ?= small

.PHONY: all build run test report clean

all: build

build:
	@scripts/deps.sh build
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	@echo "flaretune: built $(BUILD)/flaretune; to run README's commands as written:"
	@echo "  export PATH=$(abspath $(BUILD)):\$$PATH"

run: build
	scripts/main-job.sh $(BUILD)

report: build
	$(BUILD)/flaretune report --models $(MODELS) \
	  $(if $(wildcard profiles/local.json),--profile profiles/local.json) -o out/report

test:
	@scripts/deps.sh test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

clean:
	rm -rf $(BUILD) out

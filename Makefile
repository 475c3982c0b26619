# celer — the two commands are `make run` and `make test`; see README.md.
# CMake does the building; this file only names the build folders and steps.

CC_DEFAULT := $(shell command -v clang >/dev/null 2>&1 && echo clang || echo cc)
CC ?= $(CC_DEFAULT)
ifeq ($(origin CC),default)
CC := $(CC_DEFAULT)
endif
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
MODEL ?= smollm2-135m
WERROR := $(if $(CI),ON,OFF)

.PHONY: all build run test asan fuzz clean
all: build

build:
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=$(CC) -DCELER_WERROR=$(WERROR) >/dev/null
	@cmake --build build -j $(JOBS)

PROMPT ?= What is the capital of France?
run: build
	@path=$$(scripts/fetch-model $(MODEL)) && ./build/celer generate -m "$$path" -p "$(PROMPT)"

# Everything CI runs: unit tests, reference parity tests, bad-input tests, fuzzers (20 s each).
# The Python tests run with .venv (made by .ci/run), else python3: without pytest, one line and exit 2.
TEST_PYTHON := $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
test:
	@$(TEST_PYTHON) -c "import pytest" 2>/dev/null || { echo "make test: $(TEST_PYTHON) has no pytest; run .ci/run once (it makes .venv with tests/requirements.txt), or: python3 -m venv .venv && .venv/bin/pip install -r tests/requirements.txt"; exit 2; }
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=$(CC) -DCELER_WERROR=$(WERROR) -DCELER_FUZZ=ON >/dev/null
	@cmake --build build -j $(JOBS)
	@cd build && ctest --output-on-failure -j $(JOBS)

asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=$(CC) -DCELER_WERROR=$(WERROR) -DCELER_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ctest --output-on-failure -j $(JOBS)

# Fuzz without a time limit (Ctrl-C to stop): make fuzz FUZZER=gguf
FUZZER ?= gguf
fuzz:
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=$(CC) -DCELER_FUZZ=ON >/dev/null
	@cmake --build build -j $(JOBS) --target fuzz_$(FUZZER)
	@mkdir -p build/fuzz-corpus/$(FUZZER)
	./build/fuzz_$(FUZZER) build/fuzz-corpus/$(FUZZER) tests/fuzz/corpus/$(FUZZER)

clean:
	rm -rf build build-asan

# Regenerates tests/data/mlx/*.json with the mlx-lm reference, then runs the parity tests against
# them (logits, and the MoE models' router choices), slow prompts included; and
# tests/data/mlx_quant/*.safetensors (mlx's quantize and dequantize), then the dequantizer test against them. Needs mlx (tests/requirements-reference.txt);
# `make test` does not. REF_MODELS=tiny-qwen3,tiny-qwen2 regenerates and checks only those models
# (and not the quantization fixtures).
REF_PYTHON ?= python3
REF_MODELS ?=
comma := ,
.PHONY: check-reference
check-reference: build
	@$(REF_PYTHON) -c "import mlx_lm, gguf, pytest" 2>/dev/null || { echo "check-reference: $(REF_PYTHON) lacks mlx-lm, gguf or pytest; install tests/requirements-reference.txt into a venv and pass REF_PYTHON=VENV/bin/python (see that file)"; exit 2; }
	@CELER_BIN=build/celer $(REF_PYTHON) tests/reference/make_mlx_fixtures.py $(if $(REF_MODELS),--models $(REF_MODELS))
	@rm -f build/mlx_parity.txt
	@CELER_BUILD_DIR=build CELER_PARITY_SLOW=1 $(REF_PYTHON) -m pytest -q -s -p no:cacheprovider tests/reference/test_mlx_parity.py tests/reference/test_moe_router.py $(if $(REF_MODELS),-k "$(subst $(comma), or ,$(REF_MODELS))")
	@$(if $(REF_MODELS),true,$(REF_PYTHON) tests/reference/make_mlx_quant_fixtures.py)
	@$(if $(REF_MODELS),true,$(REF_PYTHON) tests/reference/make_mlx_quantize_fixtures.py --check)
	@$(if $(REF_MODELS),true,CELER_BUILD_DIR=build $(REF_PYTHON) -m pytest -q -s -p no:cacheprovider tests/reference/test_mlx_dequant.py)

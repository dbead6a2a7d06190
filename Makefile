# Quire developer commands. `make help` lists them.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BUF := .tools/node_modules/.bin/buf
DATA_DIR ?= data
FUZZ_SECONDS ?= 300
FUZZ_RPC_EXAMPLES ?= 5000
SOAK_MINUTES ?= 30
# The last release's protos (a buf image): `make lint` refuses changes that would break its clients.
PROTO_BASELINE ?= protos/releases/v0.1.0.binpb
GATEWAYS ?= 1

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

setup: ## install etcd, the virtualenv with Quire and its dev tools, and buf
	@bash scripts/setup.sh

gen: setup ## regenerate Python code and docs/api.md from protos/, docs/configuration.md from the settings
	$(PY) scripts/gen_protos.py
	$(PY) scripts/gen_api_docs.py
	$(PY) scripts/gen_config_docs.py

gen-check: setup ## fail if the generated code, docs/api.md or docs/configuration.md is stale
	@rm -rf build/gen-check && $(PY) scripts/gen_protos.py build/gen-check
	@diff -r -x __pycache__ build/gen-check api/python/generated >/dev/null \
		|| (echo "generated code is stale: run 'make gen' and commit" >&2; exit 1)
	@$(PY) scripts/gen_api_docs.py build/api.md
	@diff build/api.md docs/api.md >/dev/null \
		|| (echo "docs/api.md is stale: run 'make gen' and commit" >&2; exit 1)
	@$(PY) scripts/gen_config_docs.py build/configuration.md
	@diff build/configuration.md docs/configuration.md >/dev/null \
		|| (echo "docs/configuration.md is stale: run 'make gen' and commit" >&2; exit 1)
	@echo "generated code, docs/api.md and docs/configuration.md are current"

lock: setup ## recompile requirements/lock.txt (exact pins for make setup, the image and CI) from the pyproject.toml files and requirements/dev.in
	$(VENV)/bin/uv pip compile requirements/lock.in -o requirements/lock.txt --universal --python-version 3.11 \
		--no-emit-package quire-ledger-api --no-emit-package quire-ledger-client --no-emit-package quire-ledger \
		--custom-compile-command "make lock" --quiet
	$(PY) scripts/check_lock.py

fmt: setup ## format the Python code
	$(VENV)/bin/ruff format api services clients tests scripts
	$(VENV)/bin/ruff check --fix api services clients tests scripts

lint: setup ## ruff, the lock file against every pyproject.toml, buf lint and buf breaking against the last release's protos
	$(VENV)/bin/ruff check api services clients tests scripts
	$(PY) scripts/check_lock.py
	@if [ -x $(BUF) ]; then $(BUF) lint && echo "buf lint: clean"; else echo "buf not installed; skipping proto lint"; fi
	@if [ -x $(BUF) ]; then $(BUF) breaking --against $(PROTO_BASELINE) \
		&& echo "buf breaking: compatible with $(PROTO_BASELINE)"; \
		else echo "buf not installed; skipping the breaking-change check"; fi

proto-baseline: setup ## freeze protos/ as a release's compatibility baseline (RELEASE=x.y.z; docs/upgrade.md)
	@test -n "$(RELEASE)" || (echo "usage: make proto-baseline RELEASE=x.y.z" >&2; exit 2)
	$(BUF) build -o protos/releases/v$(RELEASE).binpb
	@echo "now set PROTO_BASELINE in the Makefile to protos/releases/v$(RELEASE).binpb and commit both"

typecheck: setup ## mypy
	$(VENV)/bin/mypy api/python/quire_api services/common/quire_common services/registry/quire_registry services/bookie/quire_bookie services/placement/quire_placement services/gateway/quire_gateway services/telemetry/quire_telemetry clients/python/quire_client tests/faults

test: setup gen-check ## run the whole test suite (unit, integration, end-to-end)
	$(PY) -m pytest tests

test-faults: setup ## the fault suite, heavier rows included (build/faults/results.jsonl and results.md)
	rm -rf build/faults
	$(PY) -m pytest tests/faults -m "faults or slow_faults"
	@echo "results: build/faults/results.md"

soak: setup ## a long run under load and faults; checks data, logs, RSS and fds (SOAK_MINUTES, default 30; build/soak/)
	SOAK_MINUTES=$(SOAK_MINUTES) $(PY) -m tests.faults.soak

test-unit: setup ## only the fast unit tests
	$(PY) -m pytest tests/unit

fuzz: setup ## atheris on the decoders and hypothesis on every RPC, for longer than CI (FUZZ_SECONDS per target)
	QUIRE_FUZZ_SECONDS=$(FUZZ_SECONDS) QUIRE_FUZZ_RPC_EXAMPLES=$(FUZZ_RPC_EXAMPLES) $(PY) -m pytest tests/fuzz -s -p no:cacheprovider

certs: setup ## a throwaway CA and certificates for a TLS cluster in certs/ (quire dev certs)
	$(VENV)/bin/quire dev certs --out certs

run: setup ## start etcd + registry + placement + 3 bookies + gateway until Ctrl-C (GATEWAYS=3: three behind HAProxy; TLS: quire cluster up --tls certs)
	$(VENV)/bin/quire cluster up --data-dir $(DATA_DIR) --gateways $(GATEWAYS)

bench: setup ## write/read throughput and add latency on a throwaway local cluster (JSON in build/bench.json)
	$(VENV)/bin/quire bench --local --json build/bench.json

bench-bookie: setup ## durable adds/s through one bookie's gRPC API vs the raw rocksdict synced-batch limit
	$(VENV)/bin/quire bench bookie

bench-telemetry: setup ## the telemetry stage on 1,000,000 synthetic records, local[2]
	$(PY) -m quire_telemetry.bench --records 1000000 --master 'local[2]'

bench-telemetry-standalone: setup ## the same on a standalone Spark cluster of two 1-core workers here, then local[2]
	$(PY) scripts/bench_telemetry_standalone.py --records 1000000

bench-scale: setup ## idle CPU, RSS, etcd size and the scrub's cost of a cluster holding 0, 2,000 and 10,000 closed ledgers (JSON in build/bench-scale.json)
	$(PY) scripts/bench_scale.py --ledgers 0,2000,10000 --json build/bench-scale.json

check: lint typecheck gen-check test ## lint, types, generated code and the whole suite

image: ## build the container image quire:latest (needs a Docker engine; docs/deploy.md)
	@bash scripts/docker-engine.sh start || (echo "make image: no Docker engine could be started" >&2; exit 1)
	@bash scripts/build-image.sh

image-telemetry: ## build quire-telemetry:latest, the image plus PySpark and Java (the telemetry CronJob's)
	@bash scripts/docker-engine.sh start || (echo "make image-telemetry: no Docker engine could be started" >&2; exit 1)
	@QUIRE_IMAGE_TELEMETRY=true bash scripts/build-image.sh

test-deploy: setup ## validate the Kubernetes manifests offline and start each overlay's pods as local processes
	$(PY) -m pytest tests/deploy

test-monitoring: setup ## the alert rules under promtool, and the dashboard's and rules' metric names
	$(PY) -m pytest tests/monitoring

test-node: setup ## the Node.js client's tests (clients/node; needs node and npm) against local clusters and, when built, the image
	$(PY) -m pytest tests/e2e/test_node_client.py tests/container/test_node_container.py

test-container: setup ## the testcontainers tests against the image (make image first)
	$(PY) -m pytest tests/container

clean: ## remove local cluster data and build output
	rm -rf $(DATA_DIR) build

.PHONY: help setup gen gen-check lock fmt lint typecheck test test-faults soak test-unit fuzz certs run bench bench-bookie bench-telemetry bench-telemetry-standalone bench-scale check clean image image-telemetry test-deploy test-monitoring test-container test-node

# Everything a fresh machine needs: `make demo` and `make test` set themselves up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup bytecode system-deps test test-slow chaos-soak test-kafka-python lint bench bench-groups bench-throughput bench-client bench-controller-moves bench-spark bench-compaction bench-transactions bench-efficiency bench-security demo clean

# The hot path compiled with mypyc (issue 20), again whenever one of its sources changes; a failed
# compile warns and leaves pure Python (the marker stops it retrying on every make).
# (defined before `setup`: make expands a rule's prerequisites as it reads the rule)
COMPILED := build/mypyc/.attempted
COMPILED_SOURCES := $(shell sed -n 's/^    "\(epochlog\.[a-z_.]*\)",$$/\1/p' epochlog/_build.py | tr . / | sed 's/$$/.py/')

setup: $(STAMP) system-deps $(COMPILED)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark,build]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

$(COMPILED): $(STAMP) epochlog/_build.py $(COMPILED_SOURCES)
	$(PY) -m epochlog._build
	mkdir -p build/mypyc && touch $(COMPILED)

# epochlog's bytecode, written once: with PYTHONDONTWRITEBYTECODE set, every Python process Spark
# starts for format("epochlog") compiled the modules it imports (~0.15 s CPU each) without it.
setup: bytecode
bytecode: $(STAMP)
	$(PY) -m compileall -q epochlog

# Debian's ZooKeeper (for clusters), kcat (an interop client) and chromium with its driver (the
# console's browser tests), only when missing.
system-deps:
	@if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v kcat >/dev/null || \
		! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		echo "installing Debian packages: zookeeper kcat chromium chromium-driver"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			zookeeper kcat chromium chromium-driver >/dev/null; \
	fi

lint: $(STAMP)
	$(PY) -m ruff check .

test: setup lint
	$(PY) -m pytest

test-slow: setup
	$(PY) -m pytest -m slow

# The chaos soak (issue 19): 20 seeds x 60 s of random faults, each on a fresh local cluster.
chaos-soak: setup system-deps
	$(PY) -m epochlog chaos --seeds 20 --duration 60 --zk-ensemble 3 --out .epochlog/chaos

# kafka-python's own integration tests (its sdist, downloaded into .epochlog/) against a local cluster.
test-kafka-python: setup system-deps
	$(PY) tests/external/kafka_python_suite.py

bench: setup
	$(PY) bench/codec.py

bench-throughput: setup
	$(PY) bench/throughput.py

bench-spark: setup
	$(PY) bench/spark.py

bench-groups: setup system-deps
	$(PY) bench/groups.py

bench-controller-moves: setup
	$(PY) bench/controller_moves.py

bench-compaction: setup system-deps
	$(PY) bench/compaction.py
	$(PY) bench/compaction_latency.py

bench-transactions: setup system-deps
	$(PY) bench/transactions.py

# What TLS and SASL cost (issue 21): SASL_SSL (SCRAM-SHA-512) against PLAINTEXT, in one run.
bench-security: setup system-deps
	$(PY) bench/security_cost.py

bench-client: setup system-deps
	$(PY) bench/client.py

# Servers' CPU per record, epochlog beside librdkafka's mock and Tansu (issue 20); ARGS=--quick etc.
bench-efficiency: setup system-deps
	$(PY) bench/efficiency.py $(ARGS)

demo: setup
	$(PY) -m epochlog demo

clean:
	rm -rf $(VENV) .epochlog .pytest_cache .hypothesis build
	find epochlog -name '*.so' -delete

# Two commands for a fresh machine: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Airflow in its own virtualenv, so its pins don't fight dbt's (orchestration/airflow/).
AIRFLOW_VENV := $(CURDIR)/.venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
AIRFLOW_REQUIREMENTS := orchestration/airflow/requirements.txt

# Everything the commands write lives under LAKEHOUSE_HOME (docs/operations.md, "What lives
# under LAKEHOUSE_HOME").
ifeq ($(strip $(LAKEHOUSE_HOME)),)
override LAKEHOUSE_HOME := $(CURDIR)/.lakehouse
endif
override LAKEHOUSE_HOME := $(abspath $(LAKEHOUSE_HOME))
export LAKEHOUSE_HOME
export TMPDIR := $(LAKEHOUSE_HOME)/tmp
# Python writes no bytecode at run time (nothing outside LAKEHOUSE_HOME and the
# virtualenvs): the virtualenvs' packages are compiled once, when installed
# (compile_packages), and every process reads that; the project's own modules compile
# in memory (all of python_jobs in 0.2 s). A PYTHONPYCACHEPREFIX would hide those caches.
export PYTHONDONTWRITEBYTECODE := 1
unexport PYTHONPYCACHEPREFIX
export PIP_CACHE_DIR := $(VENV)/pip-cache
export DO_NOT_TRACK := 1
# The catalog: unset, empty or `derby` is the embedded Derby one; a postgresql:// URL is
# the shared one. Unset, it is the URL `make catalog-up` recorded for this lakehouse, if
# any (set LAKEHOUSE_CATALOG=derby to ignore it).
LAKEHOUSE_CATALOG ?= $(shell cat "$(LAKEHOUSE_HOME)/catalog/url" 2>/dev/null)
export LAKEHOUSE_CATALOG

DBT_ARGS ?=
# make demo DEMO_ARGS="--days 2 --more-days 1 --users 100" (python -m python_jobs.tools.demo -h)
DEMO_ARGS ?=
PYTEST_ARGS ?=
RUN_ARGS ?=
MAINTAIN_ARGS ?=
# make dag-test DAG_DATE=2024-10-07T01:00:00 (the run's logical date = its interval's end; empty: now)
DAG_DATE ?=

.PHONY: help setup java python packages chromium demo test test-fast lint pr-check ingest build run maintain docs report simulate bench clean kafka-up kafka-down catalog-up catalog-down postgresql cluster-up cluster-down airflow dag-test

help:
	@echo "make demo     simulate a workload, ingest it, build everything, print a summary"
	@echo "make test     the whole test suite (ruff, sqlfluff, pytest incl. dbt builds)"
	@echo "make pr-check a pull request's SQL: lint what changed since BASE, build state:modified+ under a prefix (BASE=origin/main, STATE=dir, PREFIX=pr_x)"
	@echo "make test-fast the fast tier: lint, project rules and docs, pure-Python tests, compile checks"
	@echo "make ingest   ingest the landing zone into Bronze once (available now)"
	@echo "make build    dbt build over the whole project (extra args: DBT_ARGS=...)"
	@echo "make run      the production run: ingest, snapshot new loads, dbt build (RUN_ARGS=...)"
	@echo "make maintain OPTIMIZE and VACUUM every table, keeping the backfill horizon (MAINTAIN_ARGS=...)"
	@echo "make docs     generate the dbt docs site under LAKEHOUSE_HOME (prints its index.html)"
	@echo "make report   the observability report (HTML, charts of the ops tables) under LAKEHOUSE_HOME"
	@echo "make bench    benchmarks (see bench/), printed with their baselines"
	@echo "make kafka-up   start a Kafka broker on 127.0.0.1 (KAFKA_PORT=N, else a free port)"
	@echo "make kafka-down stop it"
	@echo "make catalog-up   start the shared catalog (PostgreSQL on 127.0.0.1, CATALOG_PORT=N, else a free port); prints LAKEHOUSE_CATALOG"
	@echo "make catalog-down stop it"
	@echo "make cluster-up   a Spark master, 2 workers and a Thrift server on them, on 127.0.0.1 (CLUSTER_PORT, CLUSTER_UI_PORT, THRIFT_PORT, THRIFT_UI_PORT; 0: a free port)"
	@echo "make cluster-down stop them"
	@echo "make airflow  create .venv-airflow with the pinned Airflow 3 (for the lakehouse DAG)"
	@echo "make packages install Debian's chromium and postgresql with apt when missing (the tests need them)"
	@echo "make dag-test one run of the Airflow DAG with Airflow's runner, AIRFLOW_HOME under LAKEHOUSE_HOME (DAG_DATE=...)"
	@echo "make setup    create .venv, install the pinned stack and compile it to bytecode, resolve the jars"

# Java 17 (or 21) is a prerequisite of Spark 4; we don't install a JDK behind your back.
# Checked the way Spark finds it: $$JAVA_HOME/bin/java if JAVA_HOME is set, else PATH.
java:
	@j=$${JAVA_HOME:+$$JAVA_HOME/bin/}java; \
	v=$$($$j -XX:-UsePerfData -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ "$$v" != "17" ] && [ "$$v" != "21" ]; then \
	  echo "Java 17 is required (found: $${v:-none})."; \
	  echo "Install it with: sudo apt-get update && sudo apt-get install -y openjdk-17-jdk-headless"; \
	  echo "(or any JDK 17 on your PATH / JAVA_HOME), then run make again."; \
	  exit 1; \
	fi

python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
	  echo "Python 3.11 is required (found: $$($(PYTHON) --version 2>&1))."; \
	  echo "Run make with PYTHON=/path/to/python3.11."; exit 1; }

# A virtualenv's packages compiled to bytecode in place, as pip does where writing bytecode
# is allowed (pip writes none under PYTHONDONTWRITEBYTECODE, which some machines set):
# without it every process compiles each module it imports, about 5,000 of them, again
# (docs/testing.md, "Bytecode").
define compile_packages
$(1)/bin/python -m compileall -q -j0 "$$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  || echo "compileall: the files above did not compile; Python compiles them when imported, if ever"
endef

$(STAMP): pyproject.toml | java python
	@mkdir -p "$(TMPDIR)"
	@test -x $(VENV)/bin/pip || $(PYTHON) -m venv --clear $(VENV)
	$(PYTHON) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' > $(VENV)/requirements.txt
	# pip asks `rustc --version` for its user agent; where rustc is a rustup proxy that
	# would write rustup settings into $$HOME, so point rustup into the venv instead.
	RUSTUP_HOME=$(VENV)/rustup $(PY) -m pip install --quiet --disable-pip-version-check -r $(VENV)/requirements.txt
	@touch $@

$(VENV)/.bytecode: $(STAMP)
	$(call compile_packages,$(VENV))
	@touch $@

# The first session resolves the Delta and Kafka connector jars, the Kafka broker's jars,
# and Kafka Connect's with the Debezium PostgreSQL connector plugin, from Maven Central
# into .venv; later sessions load them without any resolution. Then the driver JVM's
# class-sharing archive (python_jobs/class_sharing.py): every later JVM starts faster.
# Three stamps, so that `make -j` resolves the broker's and Connect's jars (one Ivy cache
# of their own, one after the other) while Spark's resolve and the archive's training
# session run, and the lint, which needs Spark's jars only, does not wait for the rest.
$(VENV)/.spark-jars: $(STAMP) python_jobs/spark.py
	@mkdir -p "$(TMPDIR)"
	$(PY) -m python_jobs.spark
	@touch $@

$(VENV)/.class-sharing: $(VENV)/.spark-jars python_jobs/class_sharing.py
	$(PY) -m python_jobs.class_sharing build
	@touch $@

$(VENV)/.kafka-jars: $(STAMP) python_jobs/tools/kafka_broker.py python_jobs/tools/kafka_connect.py
	@mkdir -p "$(TMPDIR)"
	$(PY) -m python_jobs.tools.kafka_broker resolve
	$(PY) -m python_jobs.tools.kafka_connect resolve
	@touch $@

# Debian's packages, installed with apt when missing (apt's own temporary files, not the
# lakehouse's TMPDIR): Chromium (/usr/bin/chromium) for the browser tests, driven by
# playwright, which downloads no browser of its own; PostgreSQL (/usr/lib/postgresql/*/bin)
# for the shared catalog and the Debezium source database of
# tests/e2e/test_debezium_postgres.py. `make packages`: what is missing of both, in one
# apt transaction.
CHROMIUM_MISSING = $(if $(wildcard /usr/bin/chromium),,chromium)
POSTGRESQL_MISSING = $(if $(wildcard /usr/lib/postgresql/*/bin/initdb),,postgresql)
define apt_install
@test -z "$(strip $(1))" || (export -n TMPDIR; export DEBIAN_FRONTEND=noninteractive; \
  apt-get update && apt-get install -y $(1)) || { \
  echo "$(2) Install with:"; \
  echo "  sudo apt-get update && sudo apt-get install -y $(strip $(1))"; exit 1; }
endef

chromium:
	$(call apt_install,$(CHROMIUM_MISSING),Chromium is required for the browser tests.)

postgresql:
	$(call apt_install,$(POSTGRESQL_MISSING),PostgreSQL is required for the shared catalog and the tests.)

packages:
	$(call apt_install,$(CHROMIUM_MISSING) $(POSTGRESQL_MISSING),Chromium and PostgreSQL are required for the tests.)

# Airflow 3 from PyPI alone (its constraint files live elsewhere): every package pinned in
# the requirements file.
$(AIRFLOW_STAMP): $(AIRFLOW_REQUIREMENTS) | python
	@test -x $(AIRFLOW_VENV)/bin/pip || $(PYTHON) -m venv --clear $(AIRFLOW_VENV)
	RUSTUP_HOME=$(AIRFLOW_VENV)/rustup PIP_CACHE_DIR=$(AIRFLOW_VENV)/pip-cache \
	  $(AIRFLOW_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(AIRFLOW_REQUIREMENTS)
	@touch $@

$(AIRFLOW_VENV)/.bytecode: $(AIRFLOW_STAMP)
	$(call compile_packages,$(AIRFLOW_VENV))
	@touch $@

airflow: $(AIRFLOW_VENV)/.bytecode

setup: java $(STAMP) $(VENV)/.bytecode $(VENV)/.spark-jars $(VENV)/.class-sharing $(VENV)/.kafka-jars
	@mkdir -p "$(TMPDIR)"

demo: setup
	$(PY) -m python_jobs.tools.demo $(DEMO_ARGS)

ingest: setup
	$(PY) -m python_jobs.ingest --once

build: setup
	$(PY) -m python_jobs.run_dbt build $(DBT_ARGS)

# The production run (what an operator schedules): ingest what is available, snapshot
# every new full load in order, dbt build with an execution time; exits non-zero with
# the failing step named. make run RUN_ARGS="--execution-time 2024-10-07T00:00:00"
run: setup
	$(PY) -m python_jobs.run $(RUN_ARGS)

# Table maintenance (schedule it between builds): OPTIMIZE and VACUUM on Bronze, silver,
# gold and ops, keeping what a backfill within LAKEHOUSE_BACKFILL_HORIZON_HOURS (default
# 168) restores. make maintain MAINTAIN_ARGS="--retain-hours 336" (python -m python_jobs.maintain -h)
maintain: setup
	$(PY) -m python_jobs.maintain $(MAINTAIN_ARGS)

# One thread: on a fresh lakehouse, `docs generate` would run its on-run-start hooks
# side by side (the ops tables before the ops schema exists).
docs: setup
	$(PY) -m python_jobs.run_dbt docs generate --threads 1
	@echo "lineage docs: $${DBT_TARGET_PATH:-$(LAKEHOUSE_HOME)/dbt/target}/index.html (serve the directory over HTTP to open it)"

report: setup
	$(PY) -m python_jobs.tools.report

simulate: setup
	$(PY) -m python_jobs.simulate $(SIM_ARGS)

bench: setup
	$(PY) -m bench.bench_simulator
	$(PY) -m bench.bench_ingest
	$(PY) -m bench.bench_cdc_merge
	$(PY) -m bench.bench_cdc_history
	$(PY) -m bench.bench_analyst_loop
	$(PY) -m bench.bench_visits
	$(PY) -m bench.bench_table_features

# A single-node Kafka broker (KRaft) on loopback, state under LAKEHOUSE_HOME/kafka; the
# first start resolves its jars from Maven Central into .venv.
kafka-up: setup
	$(PY) -m python_jobs.tools.kafka_broker up $(if $(KAFKA_PORT),--port $(KAFKA_PORT))

kafka-down: setup
	$(PY) -m python_jobs.tools.kafka_broker down

# The shared catalog: a PostgreSQL cluster under LAKEHOUSE_HOME/catalog on 127.0.0.1
# holding the Hive metastore; prints (and records) the URL to set as LAKEHOUSE_CATALOG.
catalog-up: setup postgresql
	$(PY) -m python_jobs.catalog up $(if $(CATALOG_PORT),--port $(CATALOG_PORT))

catalog-down: setup
	$(PY) -m python_jobs.catalog down

# A Spark standalone cluster on loopback (Spark's own master and worker classes from the
# pyspark install) and a Thrift server running on it; state under LAKEHOUSE_HOME/cluster,
# addresses in LAKEHOUSE_HOME/cluster/cluster.env (docs/deploying-cluster.md).
cluster-up: setup
	$(PY) -m python_jobs.tools.cluster up

cluster-down: setup
	$(PY) -m python_jobs.tools.cluster down

# One run of the lakehouse DAG (orchestration/airflow/dags/lakehouse.py) with Airflow's
# own runner, `airflow dags test`, against this LAKEHOUSE_HOME (python_jobs/tools/airflow_local.py).
dag-test: setup airflow
	$(PY) -m python_jobs.tools.airflow_local dags test lakehouse $(DAG_DATE)

lint: $(VENV)/.spark-jars
	$(VENV)/bin/ruff check python_jobs tests bench orchestration
	$(PY) -m python_jobs.tools.lint

# A pull request's check (docs/reviewing.md): sqlfluff on the SQL changed since BASE, then
# dbt build --select state:modified+ --defer against production's artifacts (BASE parsed
# for the local target, or STATE=<dir>) under the schema prefix PREFIX (pr_<short sha>).
BASE ?= $(shell git rev-parse --verify -q origin/main >/dev/null && echo origin/main || echo main)
pr-check: setup
	$(PY) -m python_jobs.tools.pr_check --base "$(BASE)" $(if $(STATE),--state "$(STATE)") $(if $(PREFIX),--prefix "$(PREFIX)")

# Two workers, whole files each (a file's fixtures build once); each worker has its own
# LAKEHOUSE_HOME and Spark session (tests/conftest.py). PYTEST_ARGS="-n 0" runs serially.
# Its prerequisites first, in parallel: the two virtualenvs' downloads, apt's and Maven's
# overlap, the lint runs beside the class-sharing training (on a clean clone 5 minutes
# instead of 8 and a half one after the other; docs/testing.md).
test:
	@$(MAKE) --no-print-directory -j4 -Otarget setup lint airflow packages
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The fast tier (docs/testing.md#tiers): the tests marked `fast` (tests/tiers.py lists
# their files), the same two workers; `make test` still runs every test.
test-fast: setup lint
	$(PY) -m pytest -n 2 --dist loadfile -m fast $(PYTEST_ARGS)

clean:
	@test ! -d "$(LAKEHOUSE_HOME)/catalog/postgresql" || $(PY) -m python_jobs.catalog down
	rm -rf "$(LAKEHOUSE_HOME)"

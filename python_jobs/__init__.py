"""The thin Python layer of the lakehouse.

The modules of this package are the runtime, what a production run executes:
`spark` (the session and the lakehouse's paths), `topics` (the topic registry),
`bronze` and `ingest` (Bronze ingestion), `snapshot_loads`, `run_dbt`, `run` (the
scheduled run), `maintain`, `preflight` and `catalog` (the shared catalog's checks, and
its local PostgreSQL for `make catalog-up`).

Two subpackages hold the rest: `python_jobs.tools` (developer and operator tools: the
local Kafka broker, Spark cluster and Thrift server, the demo, the report, lint and the
project rules) and `python_jobs.simulate` (the workload simulator).
"""

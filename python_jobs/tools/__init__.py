"""Developer and operator tools around the runtime: none of them runs in production.

`kafka_broker`, `cluster` and `thrift_server` start local services on loopback; `demo`
and `report` show a lakehouse; `lint` runs sqlfluff and `project_rules` checks the
project's conventions on dbt's manifest.
"""

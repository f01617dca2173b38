"""`make demo`: the whole story on this machine, end to end, with a summary.

1. simulate a few days of the blog platform into the landing zone;
2. run the pipeline as an operator schedules it (`python -m python_jobs.run`): ingest
   the landing zone into Bronze (available now), snapshot each devices full load, then
   `dbt build` (models, snapshots, tests), with this moment as the execution time;
3. simulate more days: changes, deletes, late visits, duplicates and broken records;
4. run the pipeline again: only the new files are ingested, the new window merged;
5. backfill that window (`dbt run --select visits+` at the same execution time: the
   table is restored and the window merged again, with the same result);
6. generate the lineage docs and the observability report;
7. print rows per layer, rejected rows per filter, versions in history, ingestion lag,
   and where the docs and the report are.

Runs in one process: one JVM start for the whole demo. A lakehouse that already holds
a demo's simulation is not simulated again: its landing zone is ingested and built as is.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from python_jobs import run as pipeline
from python_jobs import run_dbt
from python_jobs.spark import get_spark, paths
from python_jobs.tools import report

STEPS = 7
HISTORIES = [  # (relation, key, is-current condition)
    ("silver.users_history", "user_id", "is_current"),
    ("silver.articles_history", "article_id", "is_current"),
    ("silver.devices_history", "concat(type, '|', version)", "dbt_valid_to is null"),
]


class Progress:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.number = 0

    def step(self, text: str) -> None:
        self.number += 1
        elapsed = time.monotonic() - self.started
        print(f"\n==> [{self.number}/{STEPS}] {text}   (t+{elapsed:.0f}s)", flush=True)


def has_landing_files(landing: Path) -> bool:
    return any(landing.glob("*/*.json"))


def simulate(landing: Path, truth: Path, *args: str) -> None:
    from python_jobs.simulate.cli import main as simulate_main

    code = simulate_main(["--landing-dir", str(landing), "--truth-dir", str(truth), *args])
    if code:
        raise SystemExit(f"the simulator failed with exit code {code}")


def dbt(args: list[str]) -> None:
    result = run_dbt.invoke(args)
    if not result.success:
        raise SystemExit(f"dbt {' '.join(args)} failed (see the log above)")


def execution_time() -> str:
    """Now, as the windowed models' execution time (UTC, ISO-8601)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def run_pipeline(at: str) -> None:
    """One production run (python_jobs.run): ingest, snapshot the loads, build."""
    if pipeline.main(["--execution-time", at]):
        raise SystemExit("the run failed (see the step named above)")


def summary(spark) -> list[tuple[str, str, int]]:
    rows = []
    for schema in ("bronze", "silver", "gold", "ops"):
        listed = spark.sql(f"show tables in {schema}").collect()
        for name in sorted(row.tableName for row in listed if not row.isTemporary):
            rows.append((schema, name, spark.table(f"{schema}.{name}").count()))
    return rows


def rejected_by_filter(spark) -> list[tuple[str, int, int]]:
    """(filter, rows rejected by it first, rows failing it) over the runs of visits that
    stand: `ops.filter_stats_current`, where a backfilled window counts once (its latest
    run), so the filters' rows add up to the quarantine."""
    rows = spark.sql(
        "select filter_name, sum(rejected_rows), sum(failed_rows) from ops.filter_stats_current "
        "where model = 'visits' group by filter_name, filter_position "
        "order by filter_position"
    ).collect()
    return [tuple(r) for r in rows]


def visits_totals(spark) -> dict[str, int]:
    """What the visits statistics must add up to: Bronze rows, kept, quarantined, and
    the standing runs' rejected rows (filters) and duplicates removed."""
    stats = spark.sql(
        "select coalesce(sum(if(kind = 'filter', rejected_rows, 0)), 0), "
        "coalesce(sum(if(kind = 'deduplicate', rejected_rows, 0)), 0) "
        "from ops.filter_stats_current where model = 'visits'"
    ).first()
    return {
        "bronze": spark.table("bronze.blog_visits").count(),
        "silver": spark.table("silver.visits").count(),
        "quarantine": spark.table("silver.visits__quarantine").count(),
        "rejected": stats[0],
        "duplicates": stats[1],
    }


def versions(spark) -> list[tuple[str, int, int, int]]:
    """(history, versions, keys, current versions) of each SCD2 relation."""
    out = []
    for relation, key, current in HISTORIES:
        row = spark.sql(
            f"select count(*), count(distinct {key}), count_if({current}) from {relation}"
        ).first()
        out.append((relation, *row))
    return out


def lag(spark) -> list[tuple[str, int, float | None, float | None]]:
    """(topic, micro-batches, lag of the last batch, largest lag) in seconds. Lag is the
    batch log's: ingestion time minus the newest source commit time in the batch, which
    only change streams have (an event topic's lag is None)."""
    from python_jobs import bronze

    batches: dict[str, list] = {}
    log = spark.read.format("delta").load(bronze.batches_path()).where("not is_heartbeat")
    for row in log.select("topic", "ingested_at", "lag_seconds").orderBy("ingested_at").collect():
        batches.setdefault(row["topic"], []).append(row["lag_seconds"])
    return [
        (topic, len(lags), lags[-1], max((x for x in lags if x is not None), default=None))
        for topic, lags in sorted(batches.items())
    ]


def visits_state(spark) -> tuple[int, str]:
    count = spark.table("silver.visits").count()
    # The last two writes (a backfill's restore may set the retention back in between).
    operations = spark.sql("describe history silver.visits limit 3").collect()
    writes = [r["operation"] for r in operations if r["operation"] != "SET TBLPROPERTIES"]
    return count, " then ".join(reversed(writes[:2]))


def print_summary(spark, backfill: str) -> None:
    print(f"    {'layer':8} {'relation':36} {'rows':>10}")
    for schema, name, count in summary(spark):
        print(f"    {schema:8} {name:36} {count:>10}")
    print(f"\n    {'visits filter':26} {'rejected':>9} {'failing':>9}")
    for name, rejected, failing in rejected_by_filter(spark):
        print(f"    {name:26} {rejected:>9} {failing:>9}")
    totals = visits_totals(spark)
    print(
        f"    (each window once: rejected {totals['rejected']} = quarantine "
        f"{totals['quarantine']}; duplicates {totals['duplicates']} = Bronze "
        f"{totals['bronze']} - silver {totals['silver']} - quarantine {totals['quarantine']})"
    )
    print(f"\n    {'history':28} {'versions':>9} {'keys':>7} {'current':>8}")
    for relation, count, keys, current in versions(spark):
        print(f"    {relation:28} {count:>9} {keys:>7} {current:>8}")
    print(f"\n    {'topic':24} {'batches':>8} {'lag now':>12} {'max lag':>12}")
    for topic, batches, last, largest in lag(spark):
        print(f"    {topic:24} {batches:>8} {_duration(last):>12} {_duration(largest):>12}")
    print(f"\n    backfill: {backfill}")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds:.0f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--days", type=int, default=3, help="days simulated first (3)")
    parser.add_argument("--more-days", type=int, default=2, help="days simulated next (2)")
    parser.add_argument("--users", type=int, default=300, help="initial users (300)")
    parser.add_argument("--articles", type=int, default=120, help="initial articles (120)")
    parser.add_argument("--seed", type=int, default=42, help="simulator seed (42)")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="    %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    progress = Progress()
    p = paths()
    landing, truth = p["landing"], p["home"] / "truth"
    # The simulated days end today (UTC), so that lags are those of a live pipeline.
    start = datetime.now(UTC).date() - timedelta(days=options.days + options.more_days)
    fresh = not (truth / "manifest.json").exists() and not has_landing_files(landing)

    progress.step(f"simulate {options.days} days of the blog platform into {landing}")
    if fresh:
        simulate(
            landing,
            truth,
            *("--seed", str(options.seed), "--days", str(options.days)),
            *("--users", str(options.users), "--articles", str(options.articles)),
            *("--start-date", start.isoformat()),
        )
    else:
        print("    the landing zone already holds a workload: using it as is (make clean first")
        print("    for a new story)")

    spark = get_spark()
    first = execution_time()
    progress.step(f"run: ingest, snapshot the devices loads, dbt build (execution time {first})")
    run_pipeline(first)

    progress.step(f"simulate {options.more_days} more days: changes, late and broken records")
    if fresh:
        simulate(landing, truth, "--resume", "--days", str(options.more_days))
    else:
        print("    skipped: not a fresh lakehouse")

    second = execution_time()
    progress.step(f"run again: the new files, only the new window (execution time {second})")
    run_pipeline(second)

    progress.step(f"backfill the window of {second}: dbt run --select visits+")
    before = visits_state(spark)
    dbt(["run", "--select", "visits+", "--vars", json.dumps({"execution_time": second})])
    after = visits_state(spark)
    backfill = (
        f"silver.visits {before[0]} rows before, {after[0]} after "
        f"(its last commits: {after[1]}); the window was restored and merged again"
    )

    progress.step("lineage docs (dbt docs generate) and the observability report")
    dbt(["docs", "generate"])
    report_path = report.write_report()

    progress.step("summary")
    print_summary(spark, backfill)
    docs = Path(os.environ["DBT_TARGET_PATH"]) / "index.html"
    print(f"\n    lineage docs: {docs}")
    print(f"    report:       {report_path}")
    print(f"    lakehouse:    {p['home']}")
    print(f"    done in {time.monotonic() - progress.started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Table maintenance, what an operator schedules (``make maintain``): OPTIMIZE and VACUUM.

Runs the dbt operation ``maintain_tables`` (macros/maintenance/maintain_tables.sql) on
the target: every Delta table the ingestion job writes by path (Bronze topics, dead
letters, the ingestion batch log, under ``$LAKEHOUSE_HOME/bronze`` and ``/ops``) and
every Delta table of the target's silver, gold and ops schemas. OPTIMIZE uses a table's
own clustering, else Z-orders by the keys it declares (a model's ``unique_key``, a
Bronze table's ``loaded_at_field``), else compacts. VACUUM keeps removed files for the
retention, which is never shorter than the backfill horizon, so a backfill within the
horizon can always restore (docs/operations.md, "Maintenance and retention").

    python -m python_jobs.maintain                       # horizon 168 h (7 days)
    LAKEHOUSE_BACKFILL_HORIZON_HOURS=336 python -m python_jobs.maintain
    python -m python_jobs.maintain --retain-hours 720    # keep files 30 days
    python -m python_jobs.maintain --select 'silver.users*'   # a table and its side tables
    python -m python_jobs.maintain --target cluster

Schedule it between builds: OPTIMIZE and VACUUM are commits of their own, and a MERGE
running at the same time may have to be retried.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HORIZON_ENV = "LAKEHOUSE_BACKFILL_HORIZON_HOURS"
DEFAULT_HORIZON_HOURS = 168.0


class MaintenanceSettingError(ValueError):
    """A horizon or retention that is not a number of hours, or a retention too short."""


def hours(value: str, name: str) -> float:
    """A number of hours >= 0, or a one-line error naming the setting."""
    try:
        parsed = float(value)
    except ValueError:
        parsed = -1.0
    if not parsed >= 0:
        raise MaintenanceSettingError(f"{name} must be a number of hours >= 0, got {value!r}")
    return parsed


def policy(horizon: str | None, retain: str | None) -> tuple[float, float]:
    """(horizon, retention) in hours: the horizon from the option, else the environment,
    else 168; the retention from the option, else the horizon; never shorter."""
    horizon_hours = hours(
        horizon if horizon is not None else os.environ.get(HORIZON_ENV) or "168",
        f"the backfill horizon ({HORIZON_ENV} or --horizon-hours)",
    )
    retain_hours = horizon_hours if retain is None else hours(retain, "--retain-hours")
    if retain_hours < horizon_hours:
        raise MaintenanceSettingError(
            f"a retention of {retain_hours:g} h is shorter than the backfill horizon of "
            f"{horizon_hours:g} h ({HORIZON_ENV}): VACUUM would delete files that a "
            f"backfill within the horizon restores; retain at least {horizon_hours:g} h, "
            "or shorten the horizon"
        )
    return horizon_hours, retain_hours


def dbt_args(
    horizon_hours: float, retain_hours: float, select: list[str] | None, target: str | None
) -> list[str]:
    """The dbt command line of the maintenance operation."""
    args: dict[str, object] = {"horizon_hours": horizon_hours, "retain_hours": retain_hours}
    if select:
        args["select"] = select
    command = ["run-operation", "maintain_tables", "--args", json.dumps(args)]
    return [*command, *(["--target", target] if target else [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.maintain",
        description=__doc__.split("\n\n")[0],
        epilog=f"The backfill horizon comes from {HORIZON_ENV} (default 168 h = 7 days).",
    )
    parser.add_argument(
        "--horizon-hours",
        help=f"how far back a backfill must still restore (default: ${HORIZON_ENV} or 168)",
    )
    parser.add_argument(
        "--retain-hours",
        help="how long VACUUM keeps removed files (default: the horizon; never shorter)",
    )
    parser.add_argument(
        "--select",
        action="append",
        help="only this table (schema.table, * wildcards, e.g. 'silver.users*'); repeatable",
    )
    parser.add_argument("--target", help="dbt target (default: $DBT_TARGET or local)")
    options = parser.parse_args(argv)
    prog = parser.prog
    try:
        horizon_hours, retain_hours = policy(options.horizon_hours, options.retain_hours)
    except MaintenanceSettingError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2

    from python_jobs.preflight import PreflightError
    from python_jobs.run_dbt import invoke

    try:
        result = invoke(dbt_args(horizon_hours, retain_hours, options.select, options.target))
    except PreflightError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    if not result.success:
        print(
            f"{prog}: error: table maintenance failed (dbt's log above says where)", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line of ``python -m python_jobs.simulate``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path

from python_jobs.simulate.encoding import DAY_MS, date_to_millis
from python_jobs.simulate.runner import SimOptions, SimulationError, simulate
from python_jobs.spark import lakehouse_home

PROG = "python -m python_jobs.simulate"
DEFAULTS = SimOptions(landing_dir=Path("landing"), truth_dir=Path("truth"))


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except where the help says it already or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False) or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a probability between 0 and 1, got {text}")
    return value


def _fraction_or_off(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != -1 and not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, or -1 to disable, got {text}")
    return value


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    d = DEFAULTS
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Simulate the blog platform's sources into the landing zone: Debezium CDC of "
            "the PostgreSQL tables users and articles, the blog.visits event stream and "
            "daily devices full loads, with at-least-once/out-of-order delivery, late and "
            "invalid events and schema drift. Writes the ground truth (what a correct "
            "pipeline must produce) into the truth dir. Same seed + options => "
            "byte-identical files."
        ),
        formatter_class=_HelpFormatter,
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--landing-dir",
        metavar="PATH",
        type=Path,
        default=None,
        help="landing zone to write (default: $LAKEHOUSE_HOME/landing)",
    )
    out.add_argument(
        "--truth-dir",
        metavar="PATH",
        type=Path,
        default=None,
        help="where the ground truth, manifest and resume state go "
        "(default: $LAKEHOUSE_HOME/truth)",
    )
    out.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved in the truth dir: simulate --days more days, new "
        "files sort after the existing ones, truth updated cumulatively (--users, "
        "--articles and --start-date are then ignored)",
    )
    out.add_argument(
        "--force",
        action="store_true",
        help="wipe the simulator's earlier output (its topic dirs, reference/devices, "
        "truth files) before a fresh run",
    )
    out.add_argument("--quiet", action="store_true", help="no progress line on stderr")

    sink = parser.add_argument_group("sink")
    sink.add_argument(
        "--sink",
        choices=("files", "kafka"),
        default=d.sink,
        help="files: the topics' lines as files in the landing zone. kafka: each line "
        "as one record of the Kafka topic of the same name, in the same order (value: "
        "the line; tombstones: null values; key: the JSON of the key column(s), e.g. "
        '{"user_id":1}, null when unreadable), topics created with 3 partitions if '
        "missing, every record acknowledged (acks=all, idempotent) before it exits. "
        "Either way the devices full loads stay files in the landing zone and the truth "
        "dir is the same",
    )
    sink.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        default=None,
        help="the Kafka brokers for --sink kafka (default: the broker of this "
        "$LAKEHOUSE_HOME started by `make kafka-up`)",
    )

    scale = parser.add_argument_group("scale")
    scale.add_argument("--seed", type=int, metavar="INT", default=d.seed, help="random seed")
    scale.add_argument(
        "--users", type=_int_at_least(0), metavar="N", default=d.users, help="initial users rows"
    )
    scale.add_argument(
        "--articles",
        type=_int_at_least(0),
        metavar="N",
        default=d.articles,
        help="initial articles rows",
    )
    scale.add_argument(
        "--days", type=_int_at_least(1), metavar="N", default=d.days, help="days to simulate"
    )
    scale.add_argument(
        "--changes-per-day",
        metavar="N",
        type=_int_at_least(0),
        default=d.changes_per_day,
        help="CDC changes per day across both tables",
    )
    scale.add_argument(
        "--visits-per-day",
        metavar="N",
        type=_int_at_least(0),
        default=d.visits_per_day,
        help="visit events per day",
    )
    scale.add_argument(
        "--start-date",
        metavar="YYYY-MM-DD",
        type=_day,
        default=d.start_date,
        help="first simulated day (UTC, YYYY-MM-DD)",
    )
    scale.add_argument(
        "--files-per-topic",
        metavar="N",
        type=_int_at_least(1),
        default=d.files_per_topic,
        help="files per topic per day (delivery windows)",
    )

    chaos = parser.add_argument_group("chaos and drift")
    chaos.add_argument(
        "--chaos",
        action=argparse.BooleanOptionalAction,
        default=d.chaos,
        help="--no-chaos sets duplicate, out-of-order, late and malformed rates to 0 "
        "and writes tombstones only as 'null' (a clean stream)",
    )
    chaos_options: tuple[tuple[str, str, Callable[[str], float], str], ...] = (
        (
            "--duplicate-rate",
            "P",
            _rate,
            "probability that a record is delivered again (same or a later file)",
        ),
        (
            "--out-of-order-rate",
            "P",
            _rate,
            "probability that a record is delivered in a later file than its commit order",
        ),
        (
            "--late-rate",
            "P",
            _rate,
            "probability that a visit's event_time is hours to days older than its file",
        ),
        (
            "--malformed-rate",
            "P",
            _rate,
            "probability that a visit line is broken JSON or fails one of the visits "
            "filters (one kind each, chosen uniformly)",
        ),
        (
            "--wrapped-rate",
            "P",
            _rate,
            'share of CDC lines in the {"schema":…,"payload":…} envelope',
        ),
        (
            "--add-column-at",
            "F",
            _fraction_or_off,
            "fraction of the run's timeline after which users gains the column "
            "preferred_language (-1: never)",
        ),
        ("--delete-rate", "P", _rate, "probability that a CDC change is a delete"),
        (
            "--reinsert-rate",
            "P",
            _rate,
            "probability that an insert re-inserts a previously deleted key",
        ),
    )
    for flag, metavar, parse, text in chaos_options:
        default = getattr(d, flag.removeprefix("--").replace("-", "_"))
        chaos.add_argument(flag, metavar=metavar, type=parse, default=default, help=text)
    return parser


def options_from_args(args: argparse.Namespace) -> SimOptions:
    home = lakehouse_home()
    return SimOptions(
        landing_dir=(args.landing_dir or home / "landing").resolve(),
        truth_dir=(args.truth_dir or home / "truth").resolve(),
        seed=args.seed,
        users=args.users,
        articles=args.articles,
        days=args.days,
        changes_per_day=args.changes_per_day,
        visits_per_day=args.visits_per_day,
        start_date=args.start_date,
        chaos=args.chaos,
        duplicate_rate=args.duplicate_rate,
        out_of_order_rate=args.out_of_order_rate,
        late_rate=args.late_rate,
        malformed_rate=args.malformed_rate,
        wrapped_rate=args.wrapped_rate,
        add_column_at=args.add_column_at,
        delete_rate=args.delete_rate,
        reinsert_rate=args.reinsert_rate,
        files_per_topic=args.files_per_topic,
        resume=args.resume,
        force=args.force,
        quiet=args.quiet,
        sink=args.sink,
        bootstrap_servers=args.bootstrap_servers,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.resume and args.force:
        parser.error("--resume and --force exclude each other")
    if args.bootstrap_servers is not None and args.sink != "kafka":
        parser.error("--bootstrap-servers applies to --sink kafka only")
    if args.sink == "kafka" and not args.bootstrap_servers:
        from python_jobs.tools.kafka_broker import broker_status

        broker = broker_status()
        if broker is None:
            print(
                f"{PROG}: error: --sink kafka: no --bootstrap-servers given and no broker "
                f"running for {lakehouse_home()} (start one with `make kafka-up`)",
                file=sys.stderr,
            )
            return 1
        args.bootstrap_servers = broker.bootstrap
    options = options_from_args(args)
    if not options.resume:
        end_ms = date_to_millis(options.start_date) + options.days * DAY_MS
        if end_ms > datetime.now(UTC).timestamp() * 1000 and not options.quiet:
            print(
                f"{PROG}: warning: the simulated days end in the future; the truth assumes "
                "ingestion after the last simulated day (visits filter future_event_time)",
                file=sys.stderr,
            )
    try:
        summary = simulate(options, progress_stream=sys.stderr)
    except SimulationError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    print(summary.line())
    return 0

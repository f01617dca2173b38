"""One simulation run: the OLTP model, the visits, the devices, delivery and truth.

:func:`simulate` is the whole job behind ``python -m python_jobs.simulate``: it checks the
output directories, loads the saved state on ``--resume``, simulates the days window by
window (one file per topic and window), then writes the ground truth, the manifest and
the state for the next ``--resume``.

Randomness comes from independent seeded streams (``random.Random`` seeded with a
string, which is stable across processes), one per concern, so the same seed and
options give byte-identical files.
"""

from __future__ import annotations

import gc
import json
import random
import time
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, TextIO

from python_jobs.simulate import debezium as dbz
from python_jobs.simulate.delivery import Deliverer
from python_jobs.simulate.devices import DeviceCatalog
from python_jobs.simulate.encoding import (
    DAY_MS,
    date_to_millis,
    format_millis,
    millis_to_date_text,
)
from python_jobs.simulate.model import (
    ARTICLES,
    USERS,
    ChangeMix,
    Database,
    Transaction,
)
from python_jobs.simulate.truth import (
    TRUTH_FILES,
    CdcTruth,
    DevicesTruth,
    VisitsTruth,
    write_json,
)
from python_jobs.simulate.visits import VisitGenerator, VisitUnit
from python_jobs.simulate.writer import (
    LandingWriter,
    Sink,
    SinkError,
    files_under,
    owned_landing_paths,
    remove_paths,
)

TOPIC_VISITS = "blog.visits"
CDC_TOPICS = (USERS.topic, ARTICLES.topic)
TOPICS = (*CDC_TOPICS, TOPIC_VISITS)
STATE_FILE = "state.json"
MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
EMPTY_TOMBSTONE_RATE = 0.1  # share of tombstones written as an empty line (chaos only)
TOMBSTONE_ENDINGS = ("\nnull", "\n")


class SimulationError(Exception):
    """A run that can't start (bad directories, missing state, Kafka unreachable or
    holding another run): nothing was written; or the Kafka sink did not get every record
    acknowledged (then no truth was written)."""


@dataclass(frozen=True)
class SimOptions:
    """Every option of a run (see ``python -m python_jobs.simulate --help``)."""

    landing_dir: Path
    truth_dir: Path
    seed: int = 42
    users: int = 200
    articles: int = 100
    days: int = 3
    changes_per_day: int = 300
    visits_per_day: int = 500
    start_date: date = date(2024, 10, 1)
    chaos: bool = True
    duplicate_rate: float = 0.05
    out_of_order_rate: float = 0.05
    late_rate: float = 0.05
    malformed_rate: float = 0.02
    wrapped_rate: float = 0.3
    add_column_at: float = 0.5
    delete_rate: float = 0.05
    reinsert_rate: float = 0.25
    files_per_topic: int = 2
    resume: bool = False
    force: bool = False
    quiet: bool = False
    sink: str = "files"  # "files" (the landing zone) or "kafka"
    bootstrap_servers: str | None = None  # for sink "kafka"

    def recorded(self) -> dict[str, Any]:
        """The options that shape the output (no paths: they must not reach the files;
        nor the sink: either sink delivers the same records and truth)."""
        values = asdict(self)
        for name in ("landing_dir", "truth_dir", "force", "quiet", "sink", "bootstrap_servers"):
            values.pop(name)
        values["start_date"] = self.start_date.isoformat()
        return values


@dataclass
class TopicCounts:
    files: list[str] = field(default_factory=list)
    lines: int = 0
    events: int = 0
    tombstones: int = 0
    duplicates: int = 0
    delayed: int = 0


@dataclass
class RunSummary:
    """What one run wrote (this run only)."""

    days: int
    first_day: str
    last_day: str
    events: dict[str, int]
    lines: dict[str, int]
    files: int
    device_loads: int
    seconds: float = 0.0
    sink: str = "files"

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    def line(self) -> str:
        per_topic = ", ".join(f"{topic} {n} events" for topic, n in self.events.items())
        rate = self.total_events / self.seconds if self.seconds > 0 else 0.0
        if self.sink == "kafka":
            written = f"{sum(self.lines.values()):,} Kafka records in {self.files} batches"
        else:
            written = f"{self.files} files"
        return (
            f"simulated {self.days} day(s) {self.first_day}..{self.last_day}: {per_topic}; "
            f"{written} + {self.device_loads} device loads; "
            f"{self.seconds:.2f} s, {rate:,.0f} events/s"
        )


class Progress:
    """A plain ``\\r`` progress line on a stream (stderr), or nothing when quiet."""

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total = max(total, 1)
        self.stream = stream

    def update(self, done: int, label: str) -> None:
        if self.stream is None:
            return
        width = 30
        filled = width * done // self.total
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r[{bar}] {done}/{self.total} windows  {label}   ")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.write("\n")
            self.stream.flush()


def _rng(seed: int, run: int, stream: str) -> random.Random:
    return random.Random(f"python_jobs.simulate:{seed}:{run}:{stream}")


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _prepare_dirs(options: SimOptions) -> None:
    """Refuse to mix runs: fresh runs need empty outputs, resumes need a saved state."""
    landing, truth = options.landing_dir, options.truth_dir
    owned = owned_landing_paths(landing, TOPICS)
    truth_files = [truth / name for name in TRUTH_FILES]
    if options.resume:
        if options.force:
            raise SimulationError("--resume and --force exclude each other")
        if not (truth / STATE_FILE).is_file():
            raise SimulationError(
                f"--resume: no saved simulator state {truth / STATE_FILE}; "
                "run once without --resume first"
            )
        state = _load_json(truth / STATE_FILE)
        if state.get("format_version") != FORMAT_VERSION:
            raise SimulationError(
                f"--resume: {truth / STATE_FILE} has format {state.get('format_version')!r}; "
                f"this simulator reads format {FORMAT_VERSION}"
            )
        if options.sink == "kafka":
            return  # the topics' records are checked against the manifest in Kafka
        manifest = _load_json(truth / MANIFEST_FILE)
        for topic, counts in manifest["topics"].items():
            known = {landing / name for name in counts["files"]}
            on_disk = set(files_under([landing / topic]))
            if known - on_disk:
                raise SimulationError(
                    f"--resume: {sorted(known - on_disk)[0]} is missing: the landing dir "
                    f"{landing} does not hold the run saved in {truth}"
                )
            if on_disk - known:
                raise SimulationError(
                    f"--resume: {sorted(on_disk - known)[0]} is not part of the run saved in "
                    f"{truth} (an interrupted run?); start over with --force"
                )
        return
    existing = files_under(owned) + [p for p in truth_files if p.is_file()]
    if not existing:
        return
    if not options.force:
        shown = ", ".join(str(p) for p in existing[:3])
        more = f" and {len(existing) - 3} more" if len(existing) > 3 else ""
        raise SimulationError(
            f"the output already holds a simulation ({len(existing)} files: {shown}{more}); "
            "use --resume to continue it, or --force to wipe it and start over"
        )
    remove_paths(owned + truth_files)


class _Run:
    """The state of one invocation (fresh or resumed)."""

    def __init__(self, options: SimOptions) -> None:
        self.options = options
        truth_dir = options.truth_dir
        self.users_truth = CdcTruth(USERS)
        self.articles_truth = CdcTruth(ARTICLES)
        self.visits_truth = VisitsTruth()
        self.devices_truth = DevicesTruth()
        self._truths = {"users": self.users_truth, "articles": self.articles_truth}
        self.topics = {topic: TopicCounts() for topic in TOPICS}
        if options.resume:
            state = _load_json(truth_dir / STATE_FILE)
            manifest = _load_json(truth_dir / MANIFEST_FILE)
            self.seed0 = state["seed"]
            self.run_index = state["runs"] + 1
            self.day_ms = state["next_day_ms"]
            self.counters = dict(state["file_counters"])
            cdc_rng = _rng(options.seed, self.run_index, "cdc")
            self.db = Database.from_state(state["database"], cdc_rng)
            self.catalog = DeviceCatalog.from_state(state["devices"])
            self.runs = manifest["runs"]
            self.schema_changes = manifest["schema_changes"]
            self.device_files = manifest["devices_loads"]
            for topic, counts in manifest["topics"].items():
                self.topics[topic] = TopicCounts(**counts)
            self.users_truth.load(truth_dir / "users_history.jsonl")
            self.articles_truth.load(truth_dir / "articles_history.jsonl")
            self.visits_truth.load(truth_dir)
            self.devices_truth.load(truth_dir)
        else:
            self.seed0 = options.seed
            self.run_index = 1
            self.day_ms = date_to_millis(options.start_date)
            self.counters = dict.fromkeys(TOPICS, 0)
            self.db = Database(_rng(options.seed, 1, "cdc"))
            self.catalog = DeviceCatalog()
            self.runs = []
            self.schema_changes = []
            self.device_files = []
        run = self.run_index
        self.plan_rng = _rng(options.seed, run, "plan")
        self.format_rng = _rng(options.seed, run, "format")
        self.devices_rng = _rng(options.seed, run, "devices")
        windows = options.days * options.files_per_topic
        dup = options.duplicate_rate if options.chaos else 0.0
        ooo = options.out_of_order_rate if options.chaos else 0.0
        self.deliverers: dict[str, Deliverer[str]] = {
            topic: Deliverer(_rng(options.seed, run, f"delivery:{topic}"), windows, dup, ooo)
            for topic in CDC_TOPICS
        }
        self.visit_deliverer: Deliverer[VisitUnit] = Deliverer(
            _rng(options.seed, run, f"delivery:{TOPIC_VISITS}"), windows, dup, ooo
        )
        self.visits = VisitGenerator(
            _rng(options.seed, run, "visits"),
            options.late_rate if options.chaos else 0.0,
            options.malformed_rate if options.chaos else 0.0,
        )
        self.mix = ChangeMix(delete_rate=options.delete_rate, reinsert_rate=options.reinsert_rate)
        self.empty_tombstones = EMPTY_TOMBSTONE_RATE if options.chaos else 0.0
        self.writer = _sink(options)
        self.events = dict.fromkeys(TOPICS, 0)
        self.lines = dict.fromkeys(TOPICS, 0)
        self.files = 0

    def _all_deliverers(self) -> list[tuple[str, Deliverer[Any]]]:
        return [*self.deliverers.items(), (TOPIC_VISITS, self.visit_deliverer)]

    # --- CDC encoding ----------------------------------------------------------------

    def encode(self, tx: Transaction, units: dict[str, list[str]]) -> None:
        """The transaction's events as landing units, and its effect on the truth.

        A unit is one envelope line, or a delete's line and its tombstone joined by a
        newline. The hot path of the simulator, so lookups are hoisted out of the loop.
        """
        random_ = self.format_rng.random
        wrapped_rate = self.options.wrapped_rate
        empty_rate = self.empty_tombstones
        commit_ms = tx.commit_ms
        commit_text = format_millis(commit_ms)
        truths = self._truths
        snapshot = tx.snapshot
        last_commit = tx.last_commit_lsn
        n = len(tx.changes)
        for i, change in enumerate(tx.changes):
            table = change.table
            if snapshot:
                marker = "last" if i == n - 1 else ("first" if i == 0 else "true")
                ts_ms = commit_ms + 20 + i // 64
            else:
                marker = "false"
                ts_ms = commit_ms + 3 + int(random_() * 900)
            source = dbz.source_json(
                table.name, commit_ms, marker, tx.tx_id, change.lsn, last_commit
            )
            op = change.op
            if op == "d":
                before = dbz.key_only_json(table, change.key, change.columns)
                after = "null"
                truths[table.name].close(change.key, commit_text)
            else:
                before = "null"
                after = dbz.row_json(table, change.row, change.columns)
                truths[table.name].open(change.key, change.row, commit_text)
            payload = dbz.envelope(op, before, after, source, ts_ms)
            if wrapped_rate and random_() < wrapped_rate:
                payload = dbz.wrap(dbz.envelope_schema_json(table, change.columns), payload)
            if op == "d":
                empty = empty_rate and random_() < empty_rate
                payload += "\n" if empty else "\nnull"
            units[table.topic].append(payload)

    # --- the timeline ----------------------------------------------------------------

    def plan_day(self, day_ms: int) -> list[tuple[int, int]]:
        """The day's transactions: (commit_ms, size), commit times strictly increasing."""
        rng = self.plan_rng
        sizes: list[int] = []
        remaining = self.options.changes_per_day
        while remaining > 0:
            size = 1 if rng.random() < 0.7 else rng.randint(2, 4)
            size = min(size, remaining)
            sizes.append(size)
            remaining -= size
        offsets = sorted(rng.randrange(1, DAY_MS) for _ in sizes)
        plan: list[tuple[int, int]] = []
        previous = self.db.clock_ms
        for offset, size in zip(offsets, sizes, strict=True):
            commit = max(day_ms + offset, previous + 1)
            plan.append((commit, size))
            previous = commit
        return plan

    def run(self, progress: Progress) -> RunSummary:
        options = self.options
        db = self.db
        fpt = options.files_per_topic
        run_start = self.day_ms
        first_day = millis_to_date_text(run_start)
        drift_ms: int | None = None
        if options.add_column_at >= 0 and not db.has_preferred_language:
            drift_ms = run_start + int(options.add_column_at * options.days * DAY_MS)
        window_len = DAY_MS // fpt
        done = 0
        for day in range(options.days):
            day_ms = self.day_ms
            day_text = millis_to_date_text(day_ms)
            load = self.catalog.next_load(self.devices_rng)
            self.device_files.append(
                self.writer.write_devices(day_text, [dbz.dumps(row) for row in load])
            )
            self.devices_truth.add(day_text, load)
            devices = self.catalog.versions_by_type()
            plan = self.plan_day(day_ms)
            next_tx = 0
            for w in range(fpt):
                window = day * fpt + w
                start = day_ms + w * window_len
                end = day_ms + DAY_MS if w == fpt - 1 else start + window_len
                units: dict[str, list[str]] = {topic: [] for topic in CDC_TOPICS}
                if self.run_index == 1 and window == 0:
                    db.populate(options.users, options.articles, run_start)
                    self.encode(db.snapshot(run_start), units)
                while next_tx < len(plan) and (plan[next_tx][0] < end or w == fpt - 1):
                    commit_ms, size = plan[next_tx]
                    next_tx += 1
                    if drift_ms is not None and commit_ms >= drift_ms:
                        ddl_lsn = db.add_preferred_language()
                        self.schema_changes.append(
                            {
                                "table": USERS.name,
                                "column": "preferred_language",
                                "type": "string",
                                "ddl_lsn": ddl_lsn,
                                "after_commit_time": format_millis(db.clock_ms),
                            }
                        )
                        drift_ms = None
                    self.encode(db.transaction(commit_ms, size, self.mix), units)
                for topic in CDC_TOPICS:
                    self.events[topic] += len(units[topic])
                    self.deliver_cdc(topic, window, units[topic], day_text)
                count = options.visits_per_day // fpt + (w < options.visits_per_day % fpt)
                visits = self.visits.window(
                    start, end, count, db.live["users"], db.live["articles"], devices
                )
                self.events[TOPIC_VISITS] += len(visits)
                self.deliver_visits(window, visits, day_text)
                done += 1
                progress.update(done, f"{day_text}  {sum(self.events.values()):,} events")
            self.day_ms = day_ms + DAY_MS
        for topic, deliverer in self._all_deliverers():
            if deliverer.pending():
                raise AssertionError(f"{topic}: {deliverer.pending()} units never delivered")
        self.writer.finish()
        progress.close()
        return RunSummary(
            days=options.days,
            first_day=first_day,
            last_day=millis_to_date_text(self.day_ms - DAY_MS),
            events=dict(self.events),
            lines=dict(self.lines),
            files=self.files,
            device_loads=options.days,
            sink=options.sink,
        )

    def _write(self, topic: str, day_text: str, texts: list[str], tombstones: int) -> None:
        self.counters[topic] += 1
        relative = self.writer.write_topic_file(topic, self.counters[topic], day_text, texts)
        counts = self.topics[topic]
        counts.files.append(relative)
        counts.lines += len(texts) + tombstones
        counts.tombstones += tombstones
        self.lines[topic] += len(texts) + tombstones
        self.files += 1

    def deliver_cdc(self, topic: str, window: int, units: list[str], day_text: str) -> None:
        delivered = self.deliverers[topic].deliver(window, units)
        if delivered:
            # A unit that ends with a tombstone is a delete: two lines.
            tombstones = sum(1 for text in delivered if text.endswith(TOMBSTONE_ENDINGS))
            self._write(topic, day_text, delivered, tombstones)

    def deliver_visits(self, window: int, units: list[VisitUnit], day_text: str) -> None:
        delivered = self.visit_deliverer.deliver(window, units)
        if delivered:
            self._write(TOPIC_VISITS, day_text, [unit.text for unit in delivered], 0)
            self.visits_truth.delivered(delivered)

    # --- outputs ---------------------------------------------------------------------

    def write_outputs(self, summary: RunSummary) -> None:
        options = self.options
        truth_dir = options.truth_dir
        truth_dir.mkdir(parents=True, exist_ok=True)
        for topic, deliverer in self._all_deliverers():
            counts = deliverer.counts
            self.topics[topic].events += counts.units
            self.topics[topic].duplicates += counts.copies
            self.topics[topic].delayed += counts.delayed
        self.users_truth.write(truth_dir)
        self.articles_truth.write(truth_dir)
        self.visits_truth.write(truth_dir)
        self.devices_truth.write(truth_dir)
        self.runs.append(
            {
                "run": self.run_index,
                "seed": options.seed,
                "resume": options.resume,
                "options": options.recorded(),
                "first_day": summary.first_day,
                "last_day": summary.last_day,
                "events": summary.events,
            }
        )
        manifest = {
            "generator": "python_jobs.simulate",
            "format_version": FORMAT_VERSION,
            "seed": self.seed0,
            "options": options.recorded(),
            "runs": self.runs,
            "schema_changes": self.schema_changes,
            "topics": {topic: asdict(self.topics[topic]) for topic in TOPICS},
            "devices_loads": self.device_files,
        }
        write_json(truth_dir / MANIFEST_FILE, manifest)
        state = {
            "format_version": FORMAT_VERSION,
            "seed": self.seed0,
            "runs": self.run_index,
            "next_day_ms": self.day_ms,
            "file_counters": self.counters,
            "database": self.db.to_state(),
            "devices": self.catalog.to_state(),
        }
        write_json(truth_dir / STATE_FILE, state, indent=None)


def _sink(options: SimOptions) -> Sink:
    if options.sink == "files":
        return LandingWriter(options.landing_dir)
    from python_jobs.simulate.kafka_sink import KafkaWriter

    assert options.bootstrap_servers is not None
    return KafkaWriter(options.bootstrap_servers, options.landing_dir)


def _prepare_kafka(options: SimOptions, check_only: bool) -> None:
    """``--sink kafka``: the broker is reachable (``check_only``); then the topics hold
    nothing (fresh run; ``--force`` deletes them) or exactly the saved run (``--resume``),
    and exist."""
    from python_jobs.simulate.kafka_sink import KafkaSinkError, check_reachable, prepare_topics

    bootstrap = options.bootstrap_servers
    if not bootstrap:
        raise SimulationError("--sink kafka needs the bootstrap servers")
    try:
        if check_only:
            check_reachable(bootstrap)
            return
        expected = None
        if options.resume:
            manifest = _load_json(options.truth_dir / MANIFEST_FILE)
            expected = {topic: c["lines"] for topic, c in manifest["topics"].items()}
        prepare_topics(bootstrap, list(TOPICS), expected, options.force)
    except KafkaSinkError as error:
        raise SimulationError(str(error)) from None


def simulate(options: SimOptions, progress_stream: TextIO | None = None) -> RunSummary:
    """Run the simulation described by ``options``; returns what this run wrote.

    The progress line goes to ``progress_stream`` (none if None or ``options.quiet``).
    """
    started = time.perf_counter()
    if options.sink not in ("files", "kafka"):
        raise SimulationError(f"unknown sink {options.sink!r} (files or kafka)")
    if options.sink == "kafka":
        _prepare_kafka(options, check_only=True)
    _prepare_dirs(options)
    if options.sink == "kafka":
        _prepare_kafka(options, check_only=False)
    # The run builds millions of small, long-lived objects and no reference cycles:
    # the cyclic garbage collector would rescan them over and over for nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        run = _Run(options)
        stream = None if options.quiet else progress_stream
        try:
            summary = run.run(Progress(options.days * options.files_per_topic, stream))
        except SinkError as error:
            raise SimulationError(f"{error}; the truth was not written") from None
        run.write_outputs(summary)
    finally:
        if gc_was_enabled:
            gc.enable()
    summary.seconds = time.perf_counter() - started
    return summary

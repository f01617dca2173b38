"""`make report`: the observability report, one self-contained HTML page.

Reads the run metadata the pipeline writes and charts it over time:

- ingestion lag, throughput and dead letters per topic, from the ingestion job's batch
  log (`ops.ingestion_batches`, read by path) and `bronze.dead_letter`;
- rejected rows per filter and duplicates removed, per window: the runs that stand
  (`ops.filter_stats_current`: a backfilled window once, its latest run);
- row counts and null ratios per model after every build (`ops.dq_metrics`: the
  table's state then, a backfill's build included, not a count per window);
- schema drift: the columns the CDC topics delivered that their staging models do not
  decode (`ops.schema_drift`), when each was first seen;
- successful builds per model (`ops.window_runs` and `ops.dq_metrics`) and the
  freshness of each Bronze table (newest `_ingested_at`).

Writes ``$LAKEHOUSE_HOME/report/index.html`` (or ``--output DIR``): no scripts, no
external CSS or fonts; every chart is an inline SVG drawn here. A table that does not
exist yet, or holds nothing to chart, gives a panel saying "no data yet".

    python -m python_jobs.tools.report [--output DIR]
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from pyspark.sql import DataFrame, SparkSession

from python_jobs.spark import paths

# Tableau 10: distinct on screen and in print.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
WIDTH = 760
CHAR_WIDTH = 6.6  # average width of a 11px sans-serif character, for layout
ROW = 28.0  # height of one labelled row (bars, timeline)
PERIOD_HOURS = {"minute": 1 / 60, "hour": 1.0, "day": 24.0}


@dataclass
class Chart:
    """One panel: what it shows, where from, and its series.

    `kind` is `lines` (series of (time, value) points), `bars` (one bar per
    (label, value) of the first series) or `timeline` (one row per series, a mark per
    time; `marks` names the earlier marks, hollow, and the last one, filled, in the
    legend: no entry for None). `empty` says why there is nothing to draw.
    """

    chart_id: str
    title: str
    source: str
    note: str
    kind: str
    x_label: str
    y_label: str
    series: dict[str, list[tuple]] = field(default_factory=dict)
    empty: str | None = None
    markers: list[tuple[str, float]] = field(default_factory=list)
    table: list[tuple[str, ...]] = field(default_factory=list)  # rows shown under the svg
    marks: tuple[str | None, str] = ("successful build", "last successful build")
    mark_verb: str = "built at"  # a timeline mark's tooltip: "<series>: <verb> <time>"

    @property
    def points(self) -> int:
        return sum(len(points) for points in self.series.values())

    def finish(self, empty_reason: str) -> Chart:
        """Drops empty series; with no points left, the panel says why."""
        self.series = {name: sorted(p) for name, p in sorted(self.series.items()) if p}
        if not self.series and self.empty is None:
            self.empty = empty_reason
        return self


# --- reading -----------------------------------------------------------------------------


def _read_path(spark: SparkSession, path: Path | str) -> DataFrame | None:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, str(path)):
        return None
    return spark.read.format("delta").load(str(path))


def _read_table(spark: SparkSession, name: str) -> DataFrame | None:
    return spark.table(name) if spark.catalog.tableExists(name) else None


def _rows(frame: DataFrame | None, *columns: str, where: str | None = None) -> list:
    if frame is None:
        return []
    if where:
        frame = frame.where(where)
    return frame.select(*columns).collect()


def _missing(name: str, frame: DataFrame | None) -> str:
    return f"{name} does not exist yet" if frame is None else f"{name} has no rows to chart"


def ingestion_charts(spark: SparkSession) -> list[Chart]:
    """Lag, throughput and dead letters per topic and micro-batch, from the batch log."""
    from python_jobs import bronze

    log = _read_path(spark, bronze.batches_path())
    why = _missing("ops.ingestion_batches", log)
    batches = _rows(
        log,
        "topic", "started_at", "ingested_at", "records_read", "dead_letters",
        "lag_seconds", "duration_seconds",
        where="not is_heartbeat",
    )  # fmt: skip
    lag = Chart(
        "ingestion_lag", "Ingestion lag per topic", "ops.ingestion_batches (lag_seconds)",
        "Per micro-batch: its start minus the newest source commit time it read. Event "
        "topics carry no commit time, so only change-data topics have a lag.",
        "lines", "batch start (UTC)", "lag (seconds)",
    )  # fmt: skip
    throughput = Chart(
        "ingestion_throughput", "Ingestion throughput per topic",
        "ops.ingestion_batches (records_read / duration_seconds)",
        "Per micro-batch: records read (Bronze rows, dead letters and tombstones) per "
        "second of the batch's classification and writes. Heartbeats (idle queries) are "
        "not plotted.",
        "lines", "batch start (UTC)", "records per second",
    )  # fmt: skip
    dead = Chart(
        "dead_letters", "Dead letters per topic", "ops.ingestion_batches (dead_letters)",
        "Per micro-batch: records set aside in bronze.dead_letter (zero included).",
        "lines", "batch written (UTC)", "dead letters",
    )  # fmt: skip
    for chart in (lag, throughput, dead):
        chart.series = defaultdict(list)
    for row in batches:
        if row["lag_seconds"] is not None:
            lag.series[row["topic"]].append((row["started_at"], row["lag_seconds"]))
        if row["duration_seconds"] > 0:
            rate = row["records_read"] / row["duration_seconds"]
            throughput.series[row["topic"]].append((row["started_at"], rate))
        dead.series[row["topic"]].append((row["ingested_at"], row["dead_letters"]))
    return [
        lag.finish(why if not batches else "no batch has a source commit time yet"),
        throughput.finish(why if not batches else "no batch has a duration yet"),
        dead.finish(why),
    ]


def dead_letter_reasons_chart(spark: SparkSession) -> Chart:
    from python_jobs import bronze

    table = _read_path(spark, bronze.dead_letter_path())
    chart = Chart(
        "dead_letter_reasons", "Dead letters by topic and reason",
        "bronze.dead_letter (_topic, _error_reason)",
        "Every record set aside so far, counted by topic and reason.",
        "bars", "dead letters", "topic · reason",
    )  # fmt: skip
    counts = [] if table is None else table.groupBy("_topic", "_error_reason").count().collect()
    chart.series = {
        "dead letters": [(f"{r['_topic']} · {r['_error_reason']}", r["count"]) for r in counts]
    }
    return chart.finish(_missing("bronze.dead_letter", table))


SCHEMA_DRIFT = "ops.schema_drift"


def schema_drift_chart(spark: SparkSession) -> Chart:
    """The columns the CDC topics delivered that their staging models did not decode."""
    drift = _read_table(spark, SCHEMA_DRIFT)
    chart = Chart(
        "schema_drift", "Schema drift: columns the staging models do not decode",
        f"{SCHEMA_DRIFT} (first_seen_at)",
        "Each column a CDC topic delivered to Bronze while its staging model did not decode "
        "it, at the time it was first ingested. Bronze keeps it; decoding it is a change to "
        "the staging model (docs/operations.md, \"A schema change in the source\").",
        "timeline", "first seen in Bronze (UTC)", "topic · column",
        marks=(None, "first seen"), mark_verb="first seen at",
    )  # fmt: skip
    rows = _rows(
        drift, "topic", "column_name", "first_seen_at", "first_seen_bronze_version",
        "first_seen_batch_id", "decoded", "drift_resolved_at",
    )  # fmt: skip
    chart.series = {f"{r['topic']} · {r['column_name']}": [(r["first_seen_at"], 0)] for r in rows}
    chart.table = [
        (
            r["topic"],
            r["column_name"],
            _time_text(r["first_seen_at"]),
            str(r["first_seen_bronze_version"]),
            str(r["first_seen_batch_id"]),
            f"since {_time_text(r['drift_resolved_at'])}" if r["decoded"] else "no",
        )
        for r in sorted(rows, key=lambda r: (r["topic"], r["column_name"]))
    ]
    if drift is None:
        return chart.finish(f"{SCHEMA_DRIFT} does not exist yet (dbt build creates it)")
    return chart.finish("no schema drift: the staging models decode every column delivered")


FILTER_STATS = "ops.filter_stats_current"
SUPERSEDED_NOTE = (
    " Runs superseded by a later run of their window (a backfill, a full refresh) are "
    "left out, so each window counts once."
)


def filter_charts(spark: SparkSession) -> list[Chart]:
    """Rejected rows and duplicates per window, from the runs that stand."""
    stats = _read_table(spark, FILTER_STATS)
    rows = _rows(stats, "model", "filter_name", "kind", "rejected_rows", "execution_time")
    rejected = Chart(
        "filter_rejections", "Rejected rows per filter, per window",
        f"{FILTER_STATS} (kind = 'filter', rejected_rows)",
        "Rows whose first failing filter this is, per window (zeros included), at the "
        "window's execution time." + SUPERSEDED_NOTE,
        "lines", "window (execution time, UTC)", "rejected rows",
    )  # fmt: skip
    duplicates = Chart(
        "duplicates_removed", "Duplicates removed per window",
        f"{FILTER_STATS} (kind = 'deduplicate', rejected_rows)",
        "Copies of an already kept key dropped after the filters, per window."
        + SUPERSEDED_NOTE,
        "lines", "window (execution time, UTC)", "duplicates removed",
    )  # fmt: skip
    rejected.series, duplicates.series = defaultdict(list), defaultdict(list)
    for row in rows:
        point = (row["execution_time"], row["rejected_rows"])
        if row["kind"] == "deduplicate":
            duplicates.series[row["model"]].append(point)
        else:
            rejected.series[f"{row['model']} · {row['filter_name']}"].append(point)
    why = _missing(FILTER_STATS, stats)
    if stats is None and spark.catalog.tableExists("ops.filter_stats"):
        why += " (dbt build creates it)"
    return [
        rejected.finish(why if not rows else "no filter rows yet"),
        duplicates.finish(why if not rows else "no model deduplicates yet"),
    ]


def quality_charts(spark: SparkSession) -> list[Chart]:
    """Row counts per model, and one null-ratio chart per model, per dbt run."""
    metrics = _read_table(spark, "ops.dq_metrics")
    why = _missing("ops.dq_metrics", metrics)
    rows = _rows(
        metrics, "invocation_id", "run_started_at", "relation", "column_name", "row_count",
        "null_ratio",
    )  # fmt: skip
    counts = Chart(
        "row_counts", "Row count per model, per run", "ops.dq_metrics (row_count)",
        "Rows in each silver and gold model after each build.",
        "lines", "run started (UTC)", "rows",
    )  # fmt: skip
    per_run: dict[str, dict[tuple, int]] = defaultdict(dict)
    ratios: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        per_run[row["relation"]][(row["invocation_id"], row["run_started_at"])] = row["row_count"]
        if row["null_ratio"] is not None:
            ratios[row["relation"]][row["column_name"]].append(
                (row["run_started_at"], row["null_ratio"])
            )
    counts.series = {
        relation: [(started, n) for (_, started), n in runs.items()]
        for relation, runs in per_run.items()
    }
    charts = [counts.finish(why)]
    relations = sorted(per_run) or [None]
    for relation in relations:
        chart = Chart(
            "null_ratios" if relation is None else f"null_ratios_{relation}",
            "Null ratio per column, per run" + (f": {relation}" if relation else ""),
            "ops.dq_metrics (null_ratio)",
            "Share of null values in each profiled column after each build (an empty "
            "table has no ratio).",
            "lines", "run started (UTC)", "null ratio",
        )  # fmt: skip
        chart.series = dict(ratios.get(relation, {}))
        charts.append(chart.finish(why if relation is None else "the table was always empty"))
    return charts


def builds_chart(spark: SparkSession, now: datetime) -> Chart:
    """Every successful build per model: a `succeeded` run of the windowed
    materializations, or a quality profile (written by the post-hook after a build)."""
    runs = _read_table(spark, "ops.window_runs")
    metrics = _read_table(spark, "ops.dq_metrics")
    builds: dict[tuple[str, str], datetime] = {}
    for row in _rows(runs, "model", "attempt_id", "recorded_at", where="status = 'succeeded'"):
        builds[(row["model"], row["attempt_id"])] = row["recorded_at"]
    for row in _rows(metrics, "relation", "invocation_id", "recorded_at"):
        key = (row["relation"], row["invocation_id"])
        builds[key] = max(builds.get(key, row["recorded_at"]), row["recorded_at"])
    chart = Chart(
        "builds", "Successful builds per model",
        "ops.window_runs (status = 'succeeded') and ops.dq_metrics",
        "One mark per dbt invocation that built the model; the filled mark is the last "
        "successful build.",
        "timeline", "build finished (UTC)", "model",
    )  # fmt: skip
    chart.series = defaultdict(list)
    for (model, _), at in builds.items():
        chart.series[model].append((at, 0))
    chart.finish(
        "ops.window_runs and ops.dq_metrics do not exist yet"
        if runs is None and metrics is None
        else "no successful build recorded yet"
    )
    chart.table = [
        (model, _time_text(points[-1][0]), _age_text(now - points[-1][0]))
        for model, points in chart.series.items()
    ]
    return chart


def freshness_thresholds(sources_file: Path | None = None) -> list[tuple[str, float]]:
    """The Bronze tables' freshness `warn_after` and `error_after`, in hours (those of
    the blog system's source, which declares its topics' tables)."""
    from python_jobs.topics import BLOG_SOURCES_FILE

    doc = yaml.safe_load((sources_file or BLOG_SOURCES_FILE).read_text())
    source = next(s for s in doc["sources"] if s["name"] == "blog")
    freshness = (source.get("config") or {}).get("freshness") or {}
    marks = []
    for level in ("warn_after", "error_after"):
        rule = freshness.get(level)
        if rule:
            hours = rule["count"] * PERIOD_HOURS[rule["period"]]
            marks.append((f"{level.split('_')[0]} {_number(hours)} h", hours))
    return marks


def freshness_chart(spark: SparkSession, now: datetime) -> Chart:
    from pyspark.sql import functions as F

    from python_jobs.topics import load_topics

    chart = Chart(
        "freshness", "Freshness per Bronze table", "bronze.<table> (max _ingested_at)",
        "Hours since the newest row of each Bronze table was ingested, at report time; "
        "dashed lines: the sources' freshness thresholds.",
        "bars", "hours since the newest row", "Bronze table",
    )  # fmt: skip
    bars, never = [], []
    for topic in load_topics():
        table = _read_path(spark, topic.bronze_path)
        newest = None if table is None else table.agg(F.max("_ingested_at")).first()[0]
        if newest is None:
            never.append(topic.table)
        else:
            bars.append((topic.table, (now - newest).total_seconds() / 3600))
            chart.table.append((topic.table, _time_text(newest), _age_text(now - newest)))
    chart.table += [(name, "no rows yet", "") for name in never]
    chart.series = {"hours since the newest row": bars}
    chart.markers = freshness_thresholds()
    return chart.finish("no Bronze table has rows yet")


def collect(spark: SparkSession, now: datetime | None = None) -> list[Chart]:
    """Every chart of the report, from the tables of the lakehouse `spark` is bound to."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    return [
        *ingestion_charts(spark),
        dead_letter_reasons_chart(spark),
        schema_drift_chart(spark),
        *filter_charts(spark),
        *quality_charts(spark),
        builds_chart(spark, now),
        freshness_chart(spark, now),
    ]


# --- drawing -------------------------------------------------------------------------------


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _time_text(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _age_text(age: timedelta) -> str:
    hours = age.total_seconds() / 3600
    return f"{hours:.1f} h ago" if hours >= 1 else f"{age.total_seconds() / 60:.0f} min ago"


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    tick = math.floor(low / step) * step
    ticks = [tick]
    while ticks[-1] < high - step * 1e-9:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _epoch(value: datetime) -> float:
    return value.replace(tzinfo=UTC).timestamp()


def _time_ticks(low: float, high: float, count: int = 5) -> list[tuple[float, str]]:
    span = high - low
    fmt = "%m-%d %H:%M" if span > 86400 else "%H:%M:%S" if span < 600 else "%H:%M"
    return [
        (t, datetime.fromtimestamp(t, UTC).strftime(fmt))
        for t in (low + span * i / (count - 1) for i in range(count))
    ]


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _legend(entries: list[tuple[str, str, str]], top: float) -> tuple[list[str], float]:
    """Legend entries (name, colour, mark) laid out in rows from `top`; returns the
    SVG and the height used."""
    out, x, y = [], 70.0, top
    for name, colour, mark in entries:
        width = 26 + CHAR_WIDTH * len(name) + 18
        if x + width > WIDTH - 10 and x > 70:
            x, y = 70.0, y + 18
        swatch = (
            f'<circle cx="{x + 6}" cy="{y - 4}" r="4.5" fill="{colour}"/>'
            if mark == "point"
            else f'<rect x="{x}" y="{y - 9}" width="12" height="10" fill="{colour}"/>'
        )
        if mark == "hollow":
            swatch = (
                f'<circle cx="{x + 6}" cy="{y - 4}" r="4.5" fill="white" stroke="{colour}"'
                ' stroke-width="2"/>'
            )
        out.append(
            f'<g class="legend-entry">{swatch}'
            f'<text x="{x + 18}" y="{y}" class="legend">{_esc(name)}</text></g>'
        )
        x += width
    return out, y - top + 18


@dataclass(frozen=True)
class _Frame:
    """The plot area of a chart, in SVG units."""

    left: float
    top: float
    width: float
    height: float

    @property
    def bottom(self) -> float:
        return self.top + self.height


def _time_scale(chart: Chart, frame: _Frame, pad: float = 0.0):
    """x position of a time: the span of every point's time, widened when it is one
    instant, and padded by a share of itself on both sides."""
    xs = [_epoch(x) for points in chart.series.values() for x, _ in points]
    low, high = min(xs), max(xs)
    if high - low < 1:
        low, high = low - 1800, high + 1800
    low, high = low - (high - low) * pad, high + (high - low) * pad

    def px(x: float) -> float:
        return frame.left + (x - low) / (high - low) * frame.width

    return px, low, high


def _x_ticks(frame: _Frame, ticks: list[tuple[float, str]], px, grid: bool) -> list[str]:
    """Labelled ticks below the plot; with `grid`, a grid line across it."""
    top = frame.top if grid else frame.bottom
    bottom = frame.bottom if grid else frame.bottom + 4
    return [
        f'<line class="{"grid" if grid else "axis"}" x1="{px(t):.1f}" x2="{px(t):.1f}" '
        f'y1="{top}" y2="{bottom}"/><text class="tick" x="{px(t):.1f}" '
        f'y="{frame.bottom + 17}" text-anchor="middle">{_esc(label)}</text>'
        for t, label in ticks
    ]


def _row_label(frame: _Frame, y: float, label: str) -> str:
    return (
        f'<text class="tick" x="{frame.left - 8}" y="{y + 4:.1f}" text-anchor="end">'
        f"{_esc(label)}</text>"
    )


def _axes(chart: Chart, frame: _Frame, rows: bool) -> str:
    """Both axis lines and titles; the y title turned along the axis, or (for a chart of
    labelled rows) above the row labels."""
    left, top, bottom = frame.left, frame.top, frame.bottom
    y_title = (
        f'<text class="axis-title" x="{left - 8}" y="{top - 2}" text-anchor="end">'
        if rows
        else f'<text class="axis-title" transform="translate(16,{top + frame.height / 2}) '
        'rotate(-90)" text-anchor="middle">'
    )
    return (
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>'
        f'<line class="axis" x1="{left}" x2="{left + frame.width}" y1="{bottom}" '
        f'y2="{bottom}"/><text class="axis-title" x="{left + frame.width / 2}" '
        f'y="{bottom + 38}" text-anchor="middle">{_esc(chart.x_label)}</text>'
        f"{y_title}{_esc(chart.y_label)}</text>"
    )


def _svg(chart: Chart, frame: _Frame, body: list[str], entries: list) -> str:
    """The chart's svg: its body, then the legend below the x axis."""
    legend, legend_h = _legend(entries, frame.bottom + 62)
    height = frame.bottom + 62 + legend_h
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" role="img" aria-label="{_esc(chart.title)}" '
        f'data-points="{chart.points}" data-series="{len(chart.series)}">'
        + "".join(body + legend)
        + "</svg>"
    )


def _rows_frame(labels: list[str]) -> _Frame:
    """A plot of one 28-unit row per label, the labels on its left."""
    label_w = min(260.0, 12 + CHAR_WIDTH * max(len(label) for label in labels))
    left = label_w + 34
    return _Frame(left, 14.0, WIDTH - left - 50, ROW * len(labels))


def draw_lines(chart: Chart) -> str:
    frame = _Frame(70.0, 14.0, WIDTH - 120.0, 220.0)
    px, x_low, x_high = _time_scale(chart, frame)
    ys = [float(y) for points in chart.series.values() for _, y in points]
    y_ticks = _nice_ticks(min(0.0, min(ys)), max(ys))
    y_low, y_high = y_ticks[0], y_ticks[-1]

    def py(y: float) -> float:
        return frame.bottom - (y - y_low) / (y_high - y_low) * frame.height

    body = [
        f'<line class="grid" x1="{frame.left}" x2="{frame.left + frame.width}" '
        f'y1="{py(tick):.1f}" y2="{py(tick):.1f}"/>' + _row_label(frame, py(tick), _number(tick))
        for tick in y_ticks
    ]
    body += _x_ticks(frame, _time_ticks(x_low, x_high), px, grid=False)
    body.append(_axes(chart, frame, rows=False))
    entries = []
    for index, (name, points) in enumerate(chart.series.items()):
        colour = PALETTE[index % len(PALETTE)]
        entries.append((name, colour, "point"))
        coords = [(px(_epoch(x)), py(float(y))) for x, y in points]
        if len(coords) > 1:
            path = " ".join(
                f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(coords)
            )
            body.append(f'<path class="line" d="{path}" stroke="{colour}"/>')
        for (x, y), (when, value) in zip(coords, points, strict=True):
            body.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}" '
                f'data-value="{value}"><title>{_esc(name)}: {_number(float(value))} at '
                f"{_time_text(when)}</title></circle>"
            )
    return _svg(chart, frame, body, entries)


def draw_bars(chart: Chart) -> str:
    ((name, bars),) = chart.series.items()
    frame = _rows_frame([label for label, _ in bars])
    high = max([float(v) for _, v in bars] + [m for _, m in chart.markers])
    ticks = _nice_ticks(0.0, high)

    def px(value: float) -> float:
        return frame.left + value / ticks[-1] * frame.width

    body = _x_ticks(frame, [(t, _number(t)) for t in ticks], px, grid=True)
    colour = PALETTE[0]
    for index, (label, value) in enumerate(bars):
        y = frame.top + index * ROW
        body.append(
            _row_label(frame, y + ROW / 2, label)
            + f'<rect class="bar" x="{frame.left}" y="{y + 5:.1f}" '
            f'width="{max(px(float(value)) - frame.left, 1.0):.1f}" height="{ROW - 10}" '
            f'fill="{colour}" data-value="{value}"><title>{_esc(label)}: '
            f"{_number(float(value))}</title></rect>"
        )
    entries = [(name, colour, "bar")]
    for index, (label, at) in enumerate(chart.markers):
        marker_colour = ("#edc948", "#e15759")[min(index, 1)]
        body.append(
            f'<line class="marker" x1="{px(at):.1f}" x2="{px(at):.1f}" y1="{frame.top - 4}" '
            f'y2="{frame.bottom}" stroke="{marker_colour}"/>'
        )
        entries.append((label, marker_colour, "bar"))
    body.append(_axes(chart, frame, rows=True))
    return _svg(chart, frame, body, entries)


def draw_timeline(chart: Chart) -> str:
    frame = _rows_frame(list(chart.series))
    px, x_low, x_high = _time_scale(chart, frame, pad=0.03)
    body = _x_ticks(frame, _time_ticks(x_low, x_high), px, grid=True)
    colour = PALETTE[0]
    for index, (name, points) in enumerate(chart.series.items()):
        y = frame.top + index * ROW + ROW / 2
        body.append(
            _row_label(frame, y, name) + f'<line class="grid" x1="{frame.left}" '
            f'x2="{frame.left + frame.width}" y1="{y:.1f}" y2="{y:.1f}"/>'
        )
        for position, (when, _) in enumerate(points):
            last = position == len(points) - 1
            body.append(
                f'<circle class="point{" latest" if last else ""}" cx="{px(_epoch(when)):.1f}" '
                f'cy="{y:.1f}" r="5" fill="{colour if last else "white"}" stroke="{colour}" '
                f'stroke-width="2"><title>{_esc(name)}: {_esc(chart.mark_verb)} '
                f"{_time_text(when)}</title></circle>"
            )
    body.append(_axes(chart, frame, rows=True))
    earlier, last = chart.marks
    entries = [(earlier, colour, "hollow")] if earlier else []
    return _svg(chart, frame, body, [*entries, (last, colour, "point")])


DRAW = {"lines": draw_lines, "bars": draw_bars, "timeline": draw_timeline}

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       color: #1f2933; background: #f4f6f8; margin: 0; padding: 24px 32px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 0 0 2px; }
h3 { font-size: 13px; text-transform: uppercase; letter-spacing: .06em; color: #52606d;
     margin: 28px 0 10px; }
.meta, .source, .note { color: #52606d; font-size: 12.5px; margin: 0 0 6px; }
.source code { background: #eef1f4; padding: 0 4px; border-radius: 3px; }
.grid-panels { display: flex; flex-wrap: wrap; gap: 18px; }
.panel { background: #fff; border: 1px solid #d9e2ec; border-radius: 6px; padding: 14px 16px;
         flex: 0 1 calc(50% - 9px); min-width: 520px; max-width: 800px; box-sizing: border-box; }
.panel svg { display: block; max-width: 100%; height: auto; }
.no-data { color: #7b8794; font-style: italic; padding: 28px 0; text-align: center;
           background: #f8fafc; border: 1px dashed #cbd2d9; border-radius: 4px; }
table { border-collapse: collapse; font-size: 12.5px; margin-top: 8px; }
td, th { padding: 2px 12px 2px 0; text-align: left; }
th { color: #52606d; font-weight: 600; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
.tick { font-size: 11px; fill: #52606d; }
.legend { font-size: 11px; fill: #1f2933; }
.axis-title { font-size: 11.5px; fill: #1f2933; font-weight: 600; }
.axis { stroke: #7b8794; stroke-width: 1; }
.grid { stroke: #e4e7eb; stroke-width: 1; }
.line { fill: none; stroke-width: 2; }
.marker { stroke-width: 2; stroke-dasharray: 5 4; }
"""

SECTIONS = (
    ("Ingestion", ("ingestion_lag", "ingestion_throughput", "dead_letters", "dead_letter_reasons")),
    ("Source schema", ("schema_drift",)),
    ("Filters and deduplication", ("filter_rejections", "duplicates_removed")),
    ("Data quality", ("row_counts", "null_ratios")),
    ("Builds and freshness", ("builds", "freshness")),
)
TABLE_HEADERS = {"builds": ("model", "last successful build (UTC)", "age"),
                 "freshness": ("Bronze table", "newest row ingested (UTC)", "age"),
                 "schema_drift": ("topic", "column", "first seen (UTC)", "Bronze version",
                                  "batch", "decoded")}  # fmt: skip


def render_panel(chart: Chart) -> str:
    parts = [
        f'<section class="panel" data-chart="{_esc(chart.chart_id)}">',
        f"<h2>{_esc(chart.title)}</h2>",
        f'<p class="source">from <code>{_esc(chart.source)}</code></p>',
        f'<p class="note">{_esc(chart.note)}</p>',
    ]
    if chart.empty:
        parts.append(f'<p class="no-data">no data yet ({_esc(chart.empty)})</p>')
    else:
        parts.append(DRAW[chart.kind](chart))
    if chart.table:
        header = "".join(f"<th>{_esc(h)}</th>" for h in TABLE_HEADERS[chart.chart_id])
        rows = "".join(
            "<tr>" + "".join(f"<td>{_esc(cell)}</td>" for cell in row) + "</tr>"
            for row in chart.table
        )
        parts.append(f"<table><tr>{header}</tr>{rows}</table>")
    parts.append("</section>")
    return "".join(parts)


def _section_of(chart_id: str) -> str:
    """A chart's section; `null_ratios_<relation>` goes with `null_ratios`."""
    for title, ids in SECTIONS:
        if any(chart_id == i or chart_id.startswith(f"{i}_") for i in ids):
            return title
    return "Other"


def render(charts: list[Chart], generated_at: datetime, home: Path) -> str:
    """The whole page: one section per group of charts, in SECTIONS order."""
    by_group = defaultdict(list)
    for chart in charts:
        by_group[_section_of(chart.chart_id)].append(chart)
    body = []
    for title in [t for t, _ in SECTIONS] + ["Other"]:
        if by_group.get(title):
            panels = "".join(render_panel(chart) for chart in by_group[title])
            body.append(f'<h3>{_esc(title)}</h3><div class="grid-panels">{panels}</div>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # An empty icon: otherwise the browser asks the server for /favicon.ico.
        '<link rel="icon" href="data:,">'
        "<title>Lakehouse observability report</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>Lakehouse observability report</h1>"
        f'<p class="meta">generated {_time_text(generated_at)} UTC from {_esc(home)} · '
        f"{sum(1 for c in charts if not c.empty)} of {len(charts)} charts with data</p>"
        + "".join(body)
        + "</body></html>\n"
    )


def write_report(
    spark: SparkSession | None = None, output: Path | None = None, now: datetime | None = None
) -> Path:
    """Collects every chart and writes `index.html` into `output` (default
    ``$LAKEHOUSE_HOME/report``); returns the file's path. `spark` defaults to
    :func:`python_jobs.spark.get_spark`; `now` (naive UTC) to the current time."""
    output = Path(output) if output else paths()["home"] / "report"
    if output.exists() and not output.is_dir():
        raise NotADirectoryError(f"report output {output} exists and is not a directory")
    if spark is None:
        from python_jobs.spark import get_spark

        spark = get_spark()
    now = now or datetime.now(UTC).replace(tzinfo=None)
    page = render(collect(spark, now), now, paths()["home"])
    output.mkdir(parents=True, exist_ok=True)
    target = output / "index.html"
    scratch = target.with_suffix(".html.tmp")
    scratch.write_text(page, encoding="utf-8")
    scratch.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.report", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--output", type=Path, help="directory for index.html (default: $LAKEHOUSE_HOME/report)"
    )
    args = parser.parse_args(argv)
    from python_jobs.preflight import PreflightError

    try:
        target = write_report(output=args.output)
    except NotADirectoryError as error:
        print(f"report: {error}", file=sys.stderr)
        return 2
    except PreflightError as error:
        print(f"report: {error}", file=sys.stderr)
        return 1
    print(f"observability report: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

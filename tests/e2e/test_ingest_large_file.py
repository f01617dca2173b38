"""A landing file larger than the driver's memory is ingested, every line exactly once.

One file of about 576 MiB of visit lines (generated here, each line a function of its
number, a few of them bad) is ingested by the ingestion command in its own process with
a 512 MiB driver (Spark's smallest is 450), too small to hold the file as one value:
lines are streamed, the file read in five splits, and each line's number must still be
its line in the file.
Checked with Spark aggregations (nothing of the gigabyte is collected here): every line
number once, each Bronze `_raw` byte-equal to the line that number was given, the bad
lines in the dead letters at their numbers, the batch log's counts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from python_jobs import bronze
from python_jobs.spark import REPO_ROOT
from python_jobs.topics import Topic, load_topics

TARGET_BYTES = 576 * 1024**2
DRIVER_MEMORY = "512m"
# Line n (1-based), a visit padded to a length that varies with n; every BAD_EVERY-th
# line is not JSON and every TOMBSTONE_EVERY-th line a tombstone.
BAD_EVERY = 1_000_003
TOMBSTONE_EVERY = 2_000_029
PAD_BASE, PAD_SPREAD = 100, 61


def _line(n: int) -> str:
    if n % BAD_EVERY == 0:
        return f"{{broken {n}"
    if n % TOMBSTONE_EVERY == 0:
        return "null"
    return f'{{"visit_id":"v{n}","seq":{n},"pad":"{"x" * (PAD_BASE + n % PAD_SPREAD)}"}}'


def _expected_raw(n):  # type: ignore[no-untyped-def]
    """`_line` of a good line, as a Spark expression of its number `n` (a Column)."""
    pad = F.repeat(F.lit("x"), F.lit(PAD_BASE) + n % PAD_SPREAD)
    return F.concat(
        F.lit('{"visit_id":"v'), n, F.lit('","seq":'), n, F.lit(',"pad":"'), pad, F.lit('"}')
    )


CODEGEN_MODE = "spark.sql.codegen.factoryMode"


def compiled(conf: str) -> str:
    """The suite's LAKEHOUSE_SPARK_CONF without its interpreted expressions: on tiny
    tables interpreting costs less than compiling, on this file's millions of lines it
    costs far more (186 s for the whole test at 1 GiB, against 105 s compiled)."""
    return " ".join(pair for pair in conf.split() if not pair.startswith(CODEGEN_MODE + "="))


def _write_landing(path: Path) -> int:
    """The file, written in chunks (atomically: elsewhere, then renamed in); its lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent.parent / f".{path.name}.tmp"
    n, size, chunk = 0, 0, 200_000
    with tmp.open("w", encoding="utf-8", newline="") as out:
        while size < TARGET_BYTES:
            text = "".join(_line(i) + "\n" for i in range(n + 1, n + chunk + 1))
            out.write(text)
            size += len(text)
            n += chunk
    tmp.rename(path)
    return n


@pytest.mark.slow
def test_a_file_larger_than_the_driver_is_ingested_line_by_line(spark, clean_lakehouse) -> None:
    home, landing = clean_lakehouse["home"], clean_lakehouse["landing"]
    visits = next(t for t in load_topics() if t.topic == "blog.visits")
    file = landing / visits.topic / "000001.json"
    lines = _write_landing(file)
    assert file.stat().st_size > TARGET_BYTES
    bad = lines // BAD_EVERY
    tombstones = lines // TOMBSTONE_EVERY - lines // (BAD_EVERY * TOMBSTONE_EVERY)

    env = {
        **os.environ,
        "SPARK_DRIVER_MEMORY": DRIVER_MEMORY,
        "LAKEHOUSE_SPARK_CONF": compiled(os.environ.get("LAKEHOUSE_SPARK_CONF", "")),
    }
    log = home / "ingest-large.log"
    with log.open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "python_jobs.ingest", "--once"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=1800,
        )
    assert proc.returncode == 0, log.read_text()[-3000:]
    file.unlink()  # less on disk while the tables are read

    # The checks read the half gigabyte back, with compiled expressions too.
    previous = spark.conf.get(CODEGEN_MODE, None)
    spark.conf.set(CODEGEN_MODE, "FALLBACK")
    try:
        check_tables(spark, visits, lines, bad, tombstones)
    finally:
        if previous is None:
            spark.conf.unset(CODEGEN_MODE)
        else:
            spark.conf.set(CODEGEN_MODE, previous)


def check_tables(spark, visits: Topic, lines: int, bad: int, tombstones: int) -> None:
    rows = spark.read.format("delta").load(str(visits.bronze_path))
    n = F.col("_line_number")
    (got,) = rows.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_distinct(n).alias("numbers"),
        F.min(n).alias("first"),
        F.max(n).alias("last"),
        F.count_if(F.col("_raw") != _expected_raw(n)).alias("wrong_raw"),
        F.count_if(n % BAD_EVERY == 0).alias("bad_numbers"),
        F.count_if(F.col("record_key") != F.concat(F.lit('{"visit_id":"v'), n, F.lit('"}'))).alias(
            "wrong_key"
        ),
        F.count_distinct("_source_file").alias("files"),
    ).collect()
    assert got.asDict() == {
        "rows": lines - bad - tombstones,
        "numbers": lines - bad - tombstones,
        "first": 1,
        "last": lines,
        "wrong_raw": 0,
        "bad_numbers": 0,
        "wrong_key": 0,
        "files": 1,
    }
    dead = spark.read.format("delta").load(bronze.dead_letter_path())
    got_dead = sorted((r._line_number, r._raw, r._error_reason) for r in dead.collect())
    assert got_dead == [
        (k * BAD_EVERY, f"{{broken {k * BAD_EVERY}", "malformed_json") for k in range(1, bad + 1)
    ]
    log_rows = spark.read.format("delta").load(bronze.batches_path())
    (batch,) = log_rows.where(f"topic = '{visits.topic}' and not is_heartbeat").collect()
    assert (batch.records_read, batch.bronze_rows, batch.dead_letters, batch.tombstones) == (
        lines,
        lines - bad - tombstones,
        bad,
        tombstones,
    )

"""Workload simulator: the blog platform's sources, written into the landing zone.

``python -m python_jobs.simulate`` simulates a PostgreSQL database (``users``,
``articles``) as Debezium 2.x streams it, a ``blog.visits`` event stream and daily
``reference/devices`` full loads, with the delivery faults the pipeline must survive
(at-least-once, out of order, late, invalid, schema drift), and writes beside it the
ground truth of what a correct pipeline produces.

Modules: :mod:`~python_jobs.simulate.model` (OLTP state and transactions),
:mod:`~python_jobs.simulate.debezium` (envelopes and Connect schemas),
:mod:`~python_jobs.simulate.encoding` (value encodings), :mod:`~python_jobs.simulate.jsonfmt`
(compiled row formatters, the hot path), :mod:`~python_jobs.simulate.visits`,
:mod:`~python_jobs.simulate.devices`, :mod:`~python_jobs.simulate.delivery` (duplicates and
reordering), :mod:`~python_jobs.simulate.writer` (atomic landing writes),
:mod:`~python_jobs.simulate.kafka_sink` (``--sink kafka``: the lines as Kafka records),
:mod:`~python_jobs.simulate.truth` (ground truth), :mod:`~python_jobs.simulate.runner`
(one run), :mod:`~python_jobs.simulate.cli`, and :mod:`~python_jobs.simulate.replay`, an
independent reader of the landing zone that recomputes what the truth says.
"""

from python_jobs.simulate.runner import SimOptions, SimulationError, simulate

__all__ = ["SimOptions", "SimulationError", "simulate"]

"""The ``kafka_broker`` fixture: one real Kafka broker for the whole pytest session.

Registered by ``pytest_plugins`` in ``tests/conftest.py``. The broker is started on the
first test that asks for it (free loopback ports, state under the suite's
``LAKEHOUSE_HOME``), and stopped at the end of the session, which then checks that no
broker process is left. Its topics are shared by the session: a test that needs a topic
empty deletes it first (the simulator's ``--sink kafka --force`` does).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from python_jobs.tools.kafka_broker import Broker


@pytest.fixture(scope="session")
def kafka_broker(lakehouse_home: Path) -> Iterator[Broker]:
    """A running single-node broker (``broker.bootstrap`` is ``127.0.0.1:<port>``)."""
    # Imported here: the plugin loads with conftest, before the suite's home is in use.
    from python_jobs.tools.kafka_broker import broker_pids, port_open, start_broker, stop_broker

    broker = start_broker()
    try:
        yield broker
    finally:
        stop_broker()
        assert not broker_pids(), f"Kafka broker processes left: {broker_pids()}"
        assert not port_open(broker.port), f"{broker.bootstrap} still accepts connections"

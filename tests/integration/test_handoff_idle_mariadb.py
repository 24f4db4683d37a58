"""The hand-off on an idle MariaDB whose last change is a DDL in a database the connector does not capture.

Debezium adds a GTID to its committed offset only once the next event group starts, so after a
statement without rows (here ``CREATE TABLE`` in another database) the offset's GTIDs stop short of the
primary's position for as long as the server stays idle.  The hand-off must still see the connector
past that position (docs/bootstrap.md, hand-off), within a few heartbeats and without any later write.
The wait is the bootstrap's own (``HandoffWait.of`` the engine, through ``wait_streamed``), without
Spark: only the positions matter here.  Another test writing to the shared MariaDB at the same moment
would end the idle spell early, so this one is ``serial``; the hand-off's sentence must say it read
the source's log (the connector's own offset stays short of the point).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.bootstrap import mariadb_db, onboard, wait_for_schema, wait_streamed, write_db_config
from support.common import load

from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.timeout(300)]

HANDOFF_SECONDS = 30.0
"""Three heartbeat intervals of the connector (10 s): the hand-off's budget on the idle source."""


def test_handoff_after_a_ddl_in_another_database_on_an_idle_mariadb(
    local_stack: LocalStack, tmp_path: Path
) -> None:
    with mariadb_db(local_stack) as other, mariadb_db(local_stack) as db:
        db.execute(
            "create table items (id bigint primary key, val text)",
            "insert into items values (1, 'a')",
        )
        config_path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
        onboard(config_path, db.source)
        config = load(config_path)
        table = db.qualified("items")
        db.execute("insert into items values (2, 'b')")
        wait_for_schema(config, table)  # the connector streamed the insert: its offset is at the source's end
        other.execute("create table elsewhere (id int primary key)")

        started = time.monotonic()
        how = wait_streamed(config, table, timeout=HANDOFF_SECONDS)

        assert time.monotonic() - started < HANDOFF_SECONDS
        assert "past it in the source's log" in how, how

"""``status`` shows the Kafka lag ``lag`` measures, also before the applier measured a table, and names
the table's consumer group (issue 36: a CATCHING_UP table showed lag ``-`` in ``status`` while ``lag``
said 34).  Against the stack's Postgres, Debezium and Kafka; nothing is applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.bootstrap import SourceDb, onboard, postgres_db, write_db_config
from support.common import cli_run, wait_until

from cdc_lake.config import load_config
from cdc_lake.kafka.groups import group_id
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state import StateStore, TableState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as found:
        found.execute("create table public.items (id bigint primary key, note text not null)")
        yield found


def _lag(config: Path) -> int:
    result = cli_run(config, "lag", "--json")
    return int(json.loads(result.stdout)["tables"][0]["kafka_lag_messages"] or 0)


def test_status_shows_the_lag_that_lag_measures_and_names_the_group(db: SourceDb, tmp_path: Path) -> None:
    config = write_db_config(tmp_path / "cfg", db, [{"name": "items"}], str(tmp_path / "lake"))
    onboard(config, db.source)
    db.execute("insert into public.items select g, 'x' from generate_series(1, 34) g")
    wait_until(lambda: _lag(config) >= 34, 120, "34 messages in the table's topic")
    name = f"{db.source}.public.items"
    # As after a bootstrap's hand-off: CATCHING_UP, the applier has not measured the table yet.
    with StateStore.open(load_config(config).state_store.url) as store:
        store.transition(name, TableState.BOOTSTRAPPING)
        store.transition(name, TableState.CATCHING_UP)

    lagged = _lag(config)
    (row,) = json.loads(cli_run(config, "status", "--json").stdout)

    assert row["state"] == "CATCHING_UP"
    assert row["lag_messages"] == lagged
    assert row["consumer_group"] == group_id(name, row["lake_base_path"])
    human = cli_run(config, "status")
    assert human.exit_code == 0, human.stderr
    table_row = next(line for line in human.stdout.splitlines() if line.startswith(f"│ {name}"))
    assert table_row.rstrip(" │").endswith(f" {lagged:,}"), human.stdout

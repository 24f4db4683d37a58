"""Postgres over TLS (``sslmode=verify-full`` with the stack CA): every connection uses it.

The stack's Postgres servers serve TLS with a certificate for 127.0.0.1 signed by the stack CA
(``cdc_lake/stack/tls.py``), and still accept plain connections, so what proves the settings are
used is the server's own view (``pg_stat_ssl``) and a refusal when the root certificate is wrong:
- onboard → bootstrap → apply with ``verify-full`` on primary and replica ends with the lake equal
  to the source (Spark+Hudi and hudi-rs), and the connector's replication connection is encrypted;
- the bootstrap's JDBC session on the replica is encrypted;
- with a root certificate from another CA, onboarding fails in one line naming the verification
  and creates nothing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from pyspark.sql import SparkSession
from support.bootstrap import (
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    postgres_db,
    state_of,
    write_db_config,
)
from support.common import assert_one_line_failure, cli_run, load
from support.onboard import connectors_of

from cdc_lake.sources import engine_for
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.tls import stack_ca
from cdc_lake.state.lifecycle import TableState

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ITEMS = """
create table public.items (id bigint primary key, val text, n integer);
insert into public.items select g, 'v' || g, g from generate_series(1, 50) g;
"""


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        yield created


def _tls_config(tmp_path: Path, db: SourceDb, root_cert: Path) -> Path:
    entry = db.source_config([{"name": "items"}])
    for role in ("primary", "replica"):
        entry[role] = {**entry[role], "sslmode": "verify-full", "sslrootcert": str(root_cert)}
    config_path = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"))
    data = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    data["sources"][db.source] = entry
    config_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return config_path


def _other_ca(directory: Path) -> Path:
    cert = directory / "other-ca.crt"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=other CA",
            "-keyout",
            str(directory / "other-ca.key"),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert


def test_wrong_root_certificate_is_refused_and_creates_nothing(
    local_stack: LocalStack, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(ITEMS.replace("items", "refused"))
    config_path = _tls_config(tmp_path, db, _other_ca(tmp_path))

    result = cli_run(config_path, "onboard", db.source)

    assert_one_line_failure(result, "certificate verify failed")
    assert connectors_of(db.source) == []


def test_verify_full_onboard_bootstrap_apply_end_equal_over_tls(
    spark: SparkSession, local_stack: LocalStack, db: SourceDb, tmp_path: Path
) -> None:
    db.execute(ITEMS)
    config_path = _tls_config(tmp_path, db, stack_ca(local_stack.layout))
    config = load(config_path)
    source = config.source(db.source)
    table = db.qualified("items")

    onboarded = cli_run(config_path, "onboard", db.source)
    assert onboarded.exit_code == 0, onboarded.stderr or onboarded.output
    with db.connect_pg() as conn:
        encrypted = conn.execute(
            "select s.ssl from pg_replication_slots r join pg_stat_ssl s on s.pid = r.active_pid "
            "where r.slot_name = %s",
            (source.slot_name,),
        ).fetchall()
    assert encrypted == [(True,)], "the connector's replication connection is not encrypted"
    for name in connectors_of(db.source):
        rendered = requests.get(f"{local_stack.connect.url}/connectors/{name}/config", timeout=10).json()
        assert rendered["database.sslmode"] == "verify-full"
        assert rendered["database.sslrootcert"] == str(stack_ca(local_stack.layout))

    access = engine_for(source).jdbc_access("replica")
    assert access.properties["sslmode"] == "verify-full"
    jdbc_ssl = spark.read.jdbc(
        access.url,
        "(select ssl from pg_stat_ssl where pid = pg_backend_pid()) s",
        properties=access.properties,
    ).collect()
    assert [row["ssl"] for row in jdbc_ssl] == [True]

    bootstrapped = cli_run(config_path, "bootstrap", table, "--json")
    assert bootstrapped.exit_code == 0, bootstrapped.stderr
    assert json.loads(bootstrapped.stdout)[0]["state"] == "CATCHING_UP"
    db.execute(
        "update public.items set val = 'changed' where id <= 10",
        "delete from public.items where id between 40 and 45",
        "insert into public.items values (100, 'new', 100)",
    )
    apply_until_live(spark, config, table)

    assert state_of(config, table) is TableState.LIVE
    assert assert_lake_equals_source(spark, config, db, "items", key=("id",)) == 45

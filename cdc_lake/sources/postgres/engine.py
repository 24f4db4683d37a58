"""The Postgres engine: pgoutput logical decoding through one publication and one slot per connector.

:class:`PostgresEngine` is its roles combined, each a class of its own module over the shared
connections (:mod:`~cdc_lake.sources.postgres.connection`) and catalog reads
(:mod:`~cdc_lake.sources.postgres.catalog`): the preflight's facts (:mod:`.preflight`), the capture
setup, publications and slots and the connector's parameters (:mod:`.capture`), the snapshot reads
and positions the bootstrap asks for (:mod:`.snapshot`), and the lag and the applier's questions
(:mod:`.operations`).
"""

from __future__ import annotations

from cdc_lake.sources.postgres import CAPABILITIES
from cdc_lake.sources.postgres.capture import PostgresCapture
from cdc_lake.sources.postgres.operations import PostgresOperations
from cdc_lake.sources.postgres.preflight import PostgresPreflight
from cdc_lake.sources.postgres.snapshot import PostgresSnapshot


class PostgresEngine(PostgresPreflight, PostgresCapture, PostgresSnapshot, PostgresOperations):
    """A Postgres source: primary for CDC, streaming standby for bootstrap."""

    capabilities = CAPABILITIES
    ca_setting = "sslrootcert"
    primary_tls_settings = "primary.sslmode and primary.sslrootcert"
    primary_connection_fix = "check host, port, database, user and the password variable"

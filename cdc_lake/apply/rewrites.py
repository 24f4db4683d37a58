"""Stopping a table whose source rewrote its rows without a row event (Postgres' table-rewrite log).

``ALTER TABLE ... ALTER COLUMN c TYPE t USING expr`` and ``SET UNLOGGED``: the source's rows change (or
its later changes leave the WAL) and logical decoding says nothing, so the lake would keep the old
values, LIVE (a same-type ``USING`` does not even change the writer schema).  The source logs each
rewrite (:mod:`cdc_lake.sources.postgres.rewrites`, installed by onboarding); :class:`RewriteCheck`
reads a table's rewrites and the runner stops the table in SCHEMA_CHANGED naming the statement and
``cdc-lake rebootstrap TABLE``.

When: before each batch, and again right before a batch commits, after its end offsets were fixed.  The
log is read on the primary, and a change in the batch committed after any rewrite that preceded it, so
the second check sees every rewrite the batch's changes follow: no change made after a rewrite reaches
the lake before the table stops.  The first check stops an idle table (a rewrite followed by no write).

Where a table's check starts: the bootstrap watermark's ``history_offset`` (the engine's
:meth:`~cdc_lake.sources.base.SourceEngine.rewrite_log_start` when the bootstrap began: that table's
earlier rewrites are the copy's; a re-bootstrap's copy brings its own).  A watermark without one (the
log was installed after the bootstrap) starts at the log's first id: every rewrite it holds came after
that copy.  Before a commit the table's rows are read whatever the version (an indexed query): log rows
a DBA deletes could repeat a version; prune only below every table's start.  Rewrites that
kept the values (a plain widening cast) move the start past them, in the state store; a stop keeps it,
so the table stops again on every retry until it is re-bootstrapped.

A source that cannot be asked (a failover, an applier that has no route to it) holds back the batches
of the tables checked against its log before (the bootstrap recorded a start, or a check did): the
runner skips them until it can.  A table never checked against a log (bootstrapped before the log
existed, or a topic applied without a bootstrap) applies on, with a warning once per source and process.

Cost: the log's version (newest id, rows; one query on the primary) is read at most every
:data:`REWRITE_VERSION_SECONDS` per source for the checks before batches, and once per committing batch
for the check before its commit; a table's rows are read only when the version moved since its last
read (every rewrite that commits moves the row count, whatever its id).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.lake.schema_change import SchemaDiff, table_rewrite
from cdc_lake.lake.target import TableTarget
from cdc_lake.sources.capabilities import EngineCapabilities, TableRewrite
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

REWRITE_VERSION_SECONDS = 1.0
"""How long a source's rewrite-log version is reused by the checks made before batches."""


class RewriteSource(Protocol):
    """What a check asks of a table's source (a :class:`~cdc_lake.sources.base.SourceEngine`)."""

    @property
    def capabilities(self) -> EngineCapabilities:
        """The engine's facts: whether it logs rewrites at all."""

    def rewrite_log_version(self) -> tuple[int, int] | None:
        """(newest id, rows) of the log; None without a log."""

    def table_rewrites(self, table: str, start: int) -> list[TableRewrite]:
        """``table``'s logged rewrites from id ``start``."""


RewriteSources = Callable[[str], tuple[str, RewriteSource]]
"""The source of a table (by qualified name): the source's name (the version cache's key) and engine."""


@dataclass
class _Checked:
    """A table's first unchecked log id, and the log version its rows were last read at."""

    start: int
    version: tuple[int, int] | None = None


class RewriteCheck:
    """Finds the logged rewrite of a table's source rows since the table's copy."""

    def __init__(
        self, sources: RewriteSources, store: StateStore, version_seconds: float = REWRITE_VERSION_SECONDS
    ) -> None:
        self.sources = sources
        self.store = store
        self.version_seconds = version_seconds
        self._tables: dict[tuple[str, str], _Checked] = {}
        """Per (table, base path): a re-bootstrap's new copy reads the store again."""
        self._versions: dict[str, tuple[float, tuple[int, int] | None]] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def check(self, target: TableTarget, fresh: bool) -> SchemaDiff | None:
        """The rewrite that stops ``target``, None when there is none; ``fresh`` reads the log's version
        now (before a commit), else a version at most :data:`REWRITE_VERSION_SECONDS` old."""
        name = target.qualified_name
        source_name, source = self.sources(name)
        if not source.capabilities.rewrite_log:
            return None
        key = (name, target.base_path)
        with self._lock:
            checked = self._tables.get(key)
        try:
            version = self._version(source_name, source, fresh)
        except SourceEngineError as exc:
            if checked is not None or self._recorded(name) is not None:
                raise  # checked against the log before: the batch waits for the source (the runner)
            self._warn(
                f"{source_name}/unreachable",
                f"source {source_name} cannot be asked for table rewrites ({exc}); its tables that were "
                "never checked against a rewrite log apply without the check until it can",
            )
            return None
        if version is None:
            if checked is not None or self._recorded(name) is not None:
                raise SourceEngineError(
                    f"source {source_name}: its table rewrite log is gone or unreadable, though {name} was "
                    f"checked against it: reinstall it (cdc-lake onboard {source_name}, as a superuser; "
                    'docs/schema-changes.md, "Table rewrites")'
                )
            self._warn(source_name, f"source {source_name} keeps no table rewrite log: ALTER ... TYPE ... "
                       "USING and SET UNLOGGED will not stop its tables; a superuser installs it "
                       '(docs/schema-changes.md, "Table rewrites")')
            return None
        if checked is None:
            checked = self._first(target)
        if version[0] < checked.start - 1:
            self._warn(
                f"{source_name}/{name}",
                f"{name}: the rewrite log of source {source_name} ends at id {version[0]}, below the table's "
                f"start {checked.start}: it was re-created; reading it from its first id",
            )
            checked = _Checked(1)
            self.store.set_history_offset(name, 1)
        if not fresh and checked.version == version:
            return None  # before a commit the rows are read always: log rows deleted can repeat a version
        rewrites = source.table_rewrites(target.source_table, checked.start)
        stop = next((r for r in rewrites if r.stop is not None), None)
        if stop is not None and key in self._tables:
            # A bootstrap begun since (offboarded and onboarded again at the same path) starts later.
            recorded = self._recorded(name)
            if recorded is not None and recorded > checked.start:
                checked = _Checked(recorded)
                stop = next((r for r in rewrites if r.stop is not None and r.log_id >= recorded), None)
        if stop is not None:
            with self._lock:
                self._tables[key] = _Checked(checked.start)
            return table_rewrite(name, target.source_table, stop.log_id, stop.stop or "")
        start = checked.start
        if rewrites:
            start = rewrites[-1].log_id + 1
            self.store.set_history_offset(name, start)
        with self._lock:
            self._tables[key] = _Checked(start, version)
        return None

    def _first(self, target: TableTarget) -> _Checked:
        """Where a table's first check starts: its watermark's id, else the log's first id (a table
        bootstrapped before its source had the log: every logged rewrite came after its copy; recorded)."""
        recorded = self._recorded(target.qualified_name)
        if recorded is None:
            self.store.set_history_offset(target.qualified_name, 1)
        return _Checked(1 if recorded is None else recorded)

    def _recorded(self, name: str) -> int | None:
        watermark = self.store.get_watermark(name)
        return None if watermark is None else watermark.history_offset

    def _version(self, source_name: str, source: RewriteSource, fresh: bool) -> tuple[int, int] | None:
        now = time.monotonic()
        with self._lock:
            known = self._versions.get(source_name)
        if not fresh and known is not None and now - known[0] < self.version_seconds:
            return known[1]
        version = source.rewrite_log_version()
        with self._lock:
            self._versions[source_name] = (now, version)
        return version

    def _warn(self, key: str, message: str) -> None:
        """Log ``message`` once per ``key`` and process."""
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        _LOG.warning("%s", message)

"""What one table's applier knows of its lake table between batches, read from the table and cached.

The checkpoint the next batch resumes from, with the character lengths and the layout its commit
records, comes from the latest completed commit; the row columns and the record key from the table
itself, once it has columns.  The batches write the table in the layout it records, whatever the config
says now (:mod:`cdc_lake.lake.layout`: a layout change is a re-bootstrap), with a warning naming it.  A
batch's commit updates the cache; the applier drops it after a failure, and when another writer
committed since it was read (planning from stale offsets would apply a range twice).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql.types import StructType

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.lake.checkpoint import Checkpoint, resume_checkpoint
from cdc_lake.lake.commit_metadata import CommitMetadata, written_by_cdc_lake
from cdc_lake.lake.format import LakeFormat
from cdc_lake.lake.layout import TableLayout, TableSpec, kept_layout
from cdc_lake.lake.schema import row_columns
from cdc_lake.lake.target import TableTarget
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)


class LakeState:
    """One lake table's checkpoint, latest commit, row columns, character lengths and record key."""

    def __init__(self, lake: LakeFormat, target: TableTarget, store: StateStore | None) -> None:
        self.lake = lake
        self.target = target
        self.store = store
        self._checkpoint: Checkpoint | None = None
        self.seen_commit: str | None = None
        """The latest data commit the cache was read from or wrote."""
        self.columns: StructType | None = None
        """The lake table's row columns (None before the table is known)."""
        self.lengths: dict[str, int] = {}
        """The character lengths the latest commit records (read with the checkpoint)."""
        self.record_key: tuple[str, ...] | None = None
        self.exists = False
        self.layout: TableLayout | None = None
        """The layout the latest commit records (None: none recorded, the config's is written)."""
        self._warned: TableLayout | None = None

    def forget(self) -> None:
        """Drop cached offsets and schema: they are read again from the table."""
        self._checkpoint = None
        self.seen_commit = None
        self.columns = None
        self.record_key = None
        self.exists = False

    def checkpoint(self) -> Checkpoint:
        """The offsets the next batch starts from (read from the last completed commit, then cached)."""
        if self._checkpoint is None:
            latest = self.lake.latest_commit(self.target.base_path)
            commit = latest
            if latest is not None and not written_by_cdc_lake(latest.metadata):
                commit = self.lake.latest_commit(self.target.base_path, ours=True)
                self._foreign(latest.instant)
            self._checkpoint = resume_checkpoint(
                self.target.base_path, self.target.topic, self.target.qualified_name, self.store, commit
            )
            self.seen_commit = None if latest is None else latest.instant
            stored = None if commit is None else CommitMetadata.from_dict(commit.metadata)
            self.lengths = {} if stored is None else dict(stored.char_lengths)
            self.layout = None if stored is None else stored.layout
            self._warn_layout()
            _LOG.info(
                "%s resumes from %s %s", self.target.qualified_name, self._checkpoint.origin.value,
                self._checkpoint.offsets,
            )
        return self._checkpoint

    def spec(self, key_fields: tuple[str, ...]) -> TableSpec:
        """The table as the next batch writes it: keyed by ``key_fields``, in the layout it records."""
        return kept_layout(self.target.spec(key_fields), self.layout)

    def _warn_layout(self) -> None:
        configured = self.target.spec(self.target.key_fields or ()).layout
        if self.layout is None or self.layout.same_kind(configured) or self._warned == self.layout:
            return
        self._warned = self.layout
        name = self.target.qualified_name
        _LOG.warning(
            "%s keeps the layout it was created with, %s; the config's %s applies to a new copy: "
            "cdc-lake rebootstrap %s", name, self.layout, configured, name,
        )

    def _foreign(self, instant: str) -> None:
        """Another writer committed ``instant`` (no cdc-lake checkpoint in it): the table resumes from
        cdc-lake's latest commit, and is marked possibly diverged (the rows it wrote are not the
        source's, as far as anyone knows)."""
        name = self.target.qualified_name
        why = (
            f"commit {instant} at {self.target.base_path} was made by another writer (it holds no cdc-lake "
            f"checkpoint): its rows may differ from the source; run cdc-lake validate {name}, and "
            f"cdc-lake repair {name} for the keys it names"
        )
        _LOG.error("%s: %s", name, why)
        if self.store is not None:
            info = self.store.get_table(name)
            if info is not None and info.possibly_diverged != why:
                self.store.mark_possibly_diverged(name, why)

    def still_current(self) -> bool:
        """Whether the table's latest data commit is still the one the cached checkpoint came from.

        Another process may have committed since (``apply --once`` between two batches of ``run``, each
        holding the apply lock only for its batch): planning from the cached offsets would then apply a
        range twice and move the commit offsets backwards.  Called under the apply lock, before a batch
        that has something to read; the caller drops the cache when the table moved on.
        """
        if self._checkpoint is None:
            return False
        commit = self.lake.latest_commit(self.target.base_path)
        instant = None if commit is None else commit.instant
        if instant == self.seen_commit:
            return True
        _LOG.info(
            "%s: another writer committed %s since %s; re-reading the checkpoint",
            self.target.qualified_name, instant, self.seen_commit,
        )
        return False

    def refresh(self) -> None:
        """Learn the lake table's columns; a table whose first commit never completed has none yet.

        A table an earlier cdc-lake bootstrapped through Hudi's row writer with a timestamp or binary key
        holds record keys the applier never writes (the format's ``key_refusal``): it stops here, naming
        the way out, instead of gaining a second row per key.
        """
        if self.columns is None and self.lake.table_exists(self.target.base_path):
            lake = self.lake.read(self.target.base_path, meta_columns=True)
            columns = row_columns(lake.schema)
            if columns.fields:
                record_key = self.lake.record_key_fields(self.target.base_path)
                refusal = self.lake.key_refusal(self.target.qualified_name, lake, record_key or ())
                if refusal is not None:
                    raise LakeWriteError(refusal)
                self.columns = columns
                self.record_key = record_key
                self.exists = True

    def committed(
        self,
        after: Checkpoint,
        instant: str,
        columns: StructType,
        lengths: dict[str, int],
        record_key: tuple[str, ...],
    ) -> None:
        """Take what a batch's commit ``instant`` wrote: its checkpoint, columns, lengths and record key."""
        self._checkpoint = replace(after, commit_instant=instant)
        self.seen_commit = instant
        self.layout = self.spec(record_key).layout
        self.columns = columns
        self.lengths = lengths
        self.record_key = record_key
        self.exists = True

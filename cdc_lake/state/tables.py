"""Sources, tables and their lifecycle: onboarding, the current lake copy, state transitions."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from cdc_lake.exceptions import StateStoreError, UnknownTableError
from cdc_lake.state.lifecycle import TableState, check_transition
from cdc_lake.state.models import AppliedOffsetRow, FreshnessRow, SourceRow, TableRow, utcnow
from cdc_lake.state.records import CurrentCopy, SourceInfo, TableInfo
from cdc_lake.state.runs import freshness
from cdc_lake.state.session import StoreSession, one_line_text


class TableStore(StoreSession):
    """The onboarded sources and tables, and each table's lifecycle state."""

    def upsert_source(self, name: str, engine: str, connector_names: Sequence[str] = ()) -> SourceInfo:
        """Record an onboarded source; a second call only updates what changed."""
        with self._transaction() as session:
            row = session.get(SourceRow, name)
            if row is None:
                row = SourceRow(
                    name=name, engine=engine, onboarded_at=utcnow(), connector_names=list(connector_names)
                )
                session.add(row)
            else:
                if row.engine != engine:
                    row.engine = engine
                if row.connector_names != list(connector_names):
                    row.connector_names = list(connector_names)
            return _source_info(row)

    def get_source(self, name: str) -> SourceInfo | None:
        """The onboarded source called ``name``, if any."""
        with self._transaction() as session:
            row = session.get(SourceRow, name)
            return None if row is None else _source_info(row)

    def upsert_table(self, qualified_name: str, source: str, tier: int, lake_base_path: str) -> TableInfo:
        """Record a table as PENDING_BOOTSTRAP, or update its tier and path; its state is never touched.

        Re-running with the same values changes nothing, not even ``updated_at``.
        """
        with self._transaction() as session:
            if session.get(SourceRow, source) is None:
                raise StateStoreError(f"table {qualified_name}: source {source} is not onboarded")
            row = session.get(TableRow, qualified_name)
            if row is None:
                row = TableRow(
                    qualified_name=qualified_name,
                    source=source,
                    tier=tier,
                    state=TableState.PENDING_BOOTSTRAP.value,
                    lake_base_path=lake_base_path,
                    last_error=None,
                    updated_at=utcnow(),
                )
                session.add(row)
            elif row.source != source:
                raise StateStoreError(f"table {qualified_name}: belongs to source {row.source}, not {source}")
            elif (row.tier, row.lake_base_path) != (tier, lake_base_path):
                row.tier = tier
                # A re-bootstrapped table lives in a versioned path derived from the configured one.
                if not row.lake_base_path.startswith(versioned_path(lake_base_path, 0)[:-1]):
                    row.lake_base_path = lake_base_path
                row.updated_at = utcnow()
            return table_info(row)

    def get_table(self, qualified_name: str) -> TableInfo | None:
        """The table called ``source.schema.table``, if it was onboarded."""
        with self._transaction() as session:
            row = session.get(TableRow, qualified_name)
            return None if row is None else table_info(row)

    def require_table(self, qualified_name: str) -> TableInfo:
        """Like :meth:`get_table`, but a table never onboarded is an error."""
        table = self.get_table(qualified_name)
        if table is None:
            raise UnknownTableError(f"table {qualified_name} is not onboarded (run cdc-lake onboard first)")
        return table

    def current_copy(self, qualified_name: str) -> CurrentCopy:
        """The table's current lake copy: its base path, last commit, applied offsets and freshness.

        The one answer to "which copy is the table" for every verb (``status``, ``lag`` and the
        metrics, ``validate``, the catalog sync, ``rebootstrap --remove-old``) and for the applier:
        the path a re-bootstrap switched to, with what the switch recorded of it.
        """
        with self._transaction() as session:
            row = self._require_row(session, qualified_name)
            offsets = list(
                session.scalars(select(AppliedOffsetRow).where(AppliedOffsetRow.table_name == qualified_name))
            )
            fresh = session.get(FreshnessRow, qualified_name)
            return CurrentCopy(
                table=qualified_name,
                path=row.lake_base_path,
                last_commit=max((o.commit_instant for o in offsets), default=None),
                applied_offsets={o.kafka_partition: o.next_offset for o in offsets},
                freshness=None if fresh is None else freshness(fresh),
            )

    def list_tables(self, source: str | None = None) -> list[TableInfo]:
        """Every onboarded table (of ``source`` if given), by name."""
        query = select(TableRow).order_by(TableRow.qualified_name)
        if source is not None:
            query = query.where(TableRow.source == source)
        with self._transaction() as session:
            return [table_info(row) for row in session.scalars(query)]

    def transition(self, qualified_name: str, new_state: TableState, error: str | None = None) -> TableInfo:
        """Move a table to ``new_state`` if its lifecycle allows it; ``error`` is required for FAILED.

        ``last_error`` becomes ``error`` (so a successful transition clears it).
        """
        if new_state is TableState.FAILED and not error:
            raise StateStoreError(f"table {qualified_name}: a transition to FAILED needs an error message")
        with self._transaction() as session:
            row = session.scalars(
                select(TableRow).where(TableRow.qualified_name == qualified_name).with_for_update()
            ).one_or_none()
            if row is None:
                raise UnknownTableError(
                    f"table {qualified_name} is not onboarded (run cdc-lake onboard first)"
                )
            check_transition(qualified_name, TableState(row.state), new_state)
            row.state = new_state.value
            row.last_error = None if error is None else one_line_text(error)
            row.updated_at = utcnow()
            return table_info(row)


def versioned_path(base_path: str, version: int) -> str:
    """The base path of version ``version`` of a table configured at ``base_path`` (a sibling directory)."""
    return f"{base_path.rstrip('/')}__v{version}"


def _source_info(row: SourceRow) -> SourceInfo:
    return SourceInfo(
        name=row.name,
        engine=row.engine,
        onboarded_at=row.onboarded_at,
        connector_names=tuple(row.connector_names),
    )


def table_info(row: TableRow) -> TableInfo:
    """The plain record of a table row (the quarantine answers with it too)."""
    return TableInfo(
        qualified_name=row.qualified_name,
        source=row.source,
        tier=row.tier,
        state=TableState(row.state),
        lake_base_path=row.lake_base_path,
        last_error=row.last_error,
        updated_at=row.updated_at,
        possibly_diverged=row.possibly_diverged,
    )

"""The machinery every area of the state store shares: one engine, one transaction per call.

Each area (:mod:`~cdc_lake.state.tables`, :mod:`~cdc_lake.state.progress`,
:mod:`~cdc_lake.state.quarantine_store`, :mod:`~cdc_lake.state.rebootstraps`, :mod:`~cdc_lake.state.runs`)
is a :class:`StoreSession`; :class:`~cdc_lake.state.store.StateStore` combines them over one engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from cdc_lake.exceptions import StateStoreError, UnknownTableError
from cdc_lake.redaction import redact
from cdc_lake.state.models import TableRow


class StoreSession:
    """The engine of the state store and the transaction each of its methods runs in."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        try:
            with self._sessions.begin() as session:
                yield session
        except SQLAlchemyError as exc:
            raise StateStoreError(f"state store: {one_line(exc)}") from None

    @staticmethod
    def _require_row(session: Session, table: str) -> TableRow:
        row = session.get(TableRow, table)
        if row is None:
            raise UnknownTableError(f"table {table} is not onboarded (run cdc-lake onboard first)")
        return row


def one_line(exc: BaseException) -> str:
    """The first line of a database error (driver messages run over several lines), secrets redacted."""
    original = getattr(exc, "orig", None)
    return one_line_text(str(original if original is not None else exc))


def one_line_text(text: str) -> str:
    """The first non-blank line of ``text``, secrets redacted."""
    lines = [line.strip() for line in redact(text).splitlines() if line.strip()]
    return lines[0] if lines else ""

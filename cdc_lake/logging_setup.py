"""Logging for every command: one format, table names in messages, secrets redacted.

``configure_logging`` installs one stderr handler on the root logger with a
:class:`SecretRedactingFilter`: the secret values registered with
:func:`cdc_lake.redaction.register_secrets` (the config's, when it is loaded)
never reach a log line (message, arguments or traceback).  ``table_logger``
prefixes a logger's messages with the table they concern.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

from cdc_lake.redaction import redact

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

class SecretRedactingFilter(logging.Filter):
    """Rewrites each record so its rendered message and traceback hold no registered secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the message with its arguments, redact it, and pre-render a redacted traceback."""
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class _CdcLakeHandler(logging.StreamHandler[TextIO]):
    """The stderr handler ``configure_logging`` owns, so a second call can find and replace it.

    It writes to whatever ``sys.stderr`` is when a record arrives: test runners swap it per test.
    """

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to the current ``sys.stderr``."""
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(verbosity: int = 0) -> None:
    """Send logs to stderr: WARNING by default, INFO with ``-v``, DEBUG with ``-vv``.

    Calling it again replaces the handler this function installed earlier.
    """
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _CdcLakeHandler)]:
        root.removeHandler(handler)
    handler = _CdcLakeHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(SecretRedactingFilter())
    root.addHandler(handler)
    root.setLevel(level)
    # py4j logs every Python-to-JVM call at DEBUG, which drowns cdc-lake's own -vv output.
    logging.getLogger("py4j").setLevel(max(level, logging.INFO))


class TableLoggerAdapter(logging.LoggerAdapter[logging.Logger]):
    """Prefixes every message with ``[source.schema.table]``."""

    def __init__(self, logger: logging.Logger, table: str) -> None:
        super().__init__(logger, {"table": table})
        self.table = table

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        """Put the table name in front of the message."""
        return f"[{self.table}] {msg}", kwargs


def table_logger(logger: logging.Logger, table: str) -> TableLoggerAdapter:
    """A logger whose messages name ``table`` (``source.schema.table``)."""
    return TableLoggerAdapter(logger, table)

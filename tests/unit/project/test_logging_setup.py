"""Log format, secret redaction and table-named loggers."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cdc_lake import redaction as secrets
from cdc_lake.logging_setup import configure_logging, table_logger
from cdc_lake.redaction import redact, register_secrets


@pytest.fixture(autouse=True)
def _isolated_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(secrets, "_registered", set())
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_secrets_are_redacted_from_message_arguments_and_tracebacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(1)
    register_secrets(["hunter2", ""])
    log = logging.getLogger("cdc_lake.test")

    log.info("connecting with password=%s", "hunter2")
    try:
        raise RuntimeError("auth failed for hunter2")
    except RuntimeError:
        log.exception("connect failed")

    err = capsys.readouterr().err
    assert "hunter2" not in err
    assert "connecting with password=***" in err
    assert "RuntimeError: auth failed for ***" in err
    assert " INFO cdc_lake.test connecting" in err


def test_longer_secrets_are_redacted_first() -> None:
    register_secrets(["abc", "abcdef"])

    assert redact("x abcdef y abc") == "x *** y ***"


def test_verbosity_levels_and_a_single_handler() -> None:
    configure_logging(0)
    configure_logging(2)

    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h.formatter, logging.Formatter) and h.filters]
    assert len(ours) == 1
    assert root.level == logging.DEBUG
    assert logging.getLogger("py4j").level == logging.INFO
    configure_logging(0)
    assert root.level == logging.WARNING


def test_table_logger_names_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(1)

    table_logger(logging.getLogger("cdc_lake.apply"), "pg.public.orders").info("applied %d events", 3)

    assert "cdc_lake.apply [pg.public.orders] applied 3 events" in capsys.readouterr().err

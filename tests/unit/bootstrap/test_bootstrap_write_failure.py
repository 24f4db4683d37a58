"""How a failed group write ends the bootstrap: a refused value once, naming what to change; else resume."""

from __future__ import annotations

from py4j.protocol import Py4JError
from support.spark_failures import RAISED, RECORDED_DROPPED_READ, RECORDED_JOB_ABORT

from cdc_lake.spark.errors import describe_failure
from cdc_lake_bootstrap.partition_copy import write_failure


def test_a_refused_value_ends_the_bootstrap_at_once_naming_the_row_without_resume() -> None:
    error = write_failure("pg.public.m", [0, 1], describe_failure(Py4JError(RECORDED_JOB_ABORT)), 1)

    assert error is not None
    message = str(error)
    assert message.startswith(RAISED)
    assert "resume" not in message
    assert "run cdc-lake bootstrap pg.public.m again" in message


def test_a_dropped_read_is_tried_again_then_resumed() -> None:
    cause = describe_failure(Py4JError(RECORDED_DROPPED_READ))

    assert write_failure("pg.public.m", [0, 1], cause, 1) is None
    last = write_failure("pg.public.m", [0, 1], cause, 2)
    assert str(last) == (
        "table pg.public.m: writing partitions [0, 1] failed: PSQLException: An I/O error occurred "
        "while sending to the backend.; run the bootstrap again to resume"
    )

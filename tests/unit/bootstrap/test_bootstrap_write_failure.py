"""How a failed group write ends the bootstrap: a refused value or a read session whose replica is behind
the watermark once, naming what to change; else resume."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JError
from support.spark_failures import RAISED, RECORDED_DROPPED_READ, RECORDED_JOB_ABORT

from cdc_lake.sources.snapshot import SessionWait
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


# What str() of the Py4JJavaError gives when a read session's replica wait fails (recorded: pyspark 3.5.7,
# local mode, the stack's Postgres standby and MariaDB replica; frames cut after the first).
RECORDED_SESSION_WAIT = {
    "postgres": (
        "An error occurred while calling o74.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 "
        "times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0) (localhost executor driver): "
        "org.postgresql.util.PSQLException: ERROR: cdc-lake session wait: this standby replayed 0/1095B410 "
        "in 1s\n"
        "  Where: PL/pgSQL function inline_code_block line 1 at RAISE\n"
        "\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2734)\n"
    ),
    "mariadb": (
        "An error occurred while calling o83.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 "
        "times, most recent failure: Lost task 0.0 in stage 1.0 (TID 1) (localhost executor driver): "
        "java.sql.SQLSyntaxErrorException: (conn=235) Variable 'sql_mode' can't be set to the value of "
        "'cdc-lake session wait: this server applied 1-1-1017 in 1s'\n"
        "\tat org.mariadb.jdbc.export.ExceptionFactory.createException(ExceptionFactory.java:289)\n"
    ),
}
SERVER_SAYS = {
    "postgres": "this standby replayed 0/1095B410 in 1s",
    "mariadb": "this server applied 1-1-1017 in 1s",
}


@pytest.mark.parametrize("engine", sorted(RECORDED_SESSION_WAIT))
def test_a_session_behind_the_watermark_ends_the_bootstrap_at_once_naming_the_position_and_setting(
    engine: str,
) -> None:
    cause = describe_failure(Py4JError(RECORDED_SESSION_WAIT[engine]))

    error = write_failure("s.d.t", [3, 4], cause, 1, SessionWait("P1", 1))

    assert str(error) == (
        "table s.d.t: partitions [3, 4] not read: their session's server had not replayed the watermark "
        "position P1, waiting at most 1s (bootstrap.replica_wait_timeout_seconds): "
        f"{SERVER_SAYS[engine]} (docs/runbooks/replica-lagging.md); the table stays BOOTSTRAPPING: once "
        "the replicas have replayed it, run cdc-lake bootstrap s.d.t again"
    )


def test_a_session_wait_failure_without_a_wait_is_an_ordinary_failure() -> None:
    cause = describe_failure(Py4JError(RECORDED_SESSION_WAIT["postgres"]))

    assert write_failure("s.d.t", [3], cause, 1) is None

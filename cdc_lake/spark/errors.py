"""Turning JVM exceptions surfaced through Py4J into one-line causes for operator messages."""

from __future__ import annotations

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException

JVM_ERRORS: tuple[type[Exception], ...] = (Py4JError, PySparkException)
"""Exceptions a Spark or JVM call can raise; catch these and re-raise a CdcLakeError."""


def root_cause(exc: BaseException) -> str:
    """The innermost Java cause as ``SimpleClassName: first message line``, else the first line of ``exc``."""
    if isinstance(exc, Py4JJavaError):
        throwable = exc.java_exception
        while throwable.getCause() is not None and not throwable.getCause().equals(throwable):
            throwable = throwable.getCause()
        lines = str(throwable.getMessage() or "").strip().splitlines()
        name = str(throwable.getClass().getSimpleName())
        return f"{name}: {lines[0]}" if lines else name
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

"""Turning JVM exceptions surfaced through Py4J into one-line causes for operator messages.

A failure that ends a command is reduced to its root cause in one line (the full trace belongs in the
log, shown with ``-v``): the innermost Java cause (for a query's ``raise_error``, the message it
raised: a value the bootstrap refuses names its table, column and row), read from the Java exception
or, when only its text is at hand, from the text's last ``Caused by:`` or the task failure a job abort
reports.
"""

from __future__ import annotations

import re

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException

from cdc_lake.exceptions import CdcLakeError
from cdc_lake.redaction import redact

REFUSED_VALUE = "of the row with key"
"""Words of every refused value's message a query raises (``raise_error``: a lossy lake type, a key
Hudi cannot tell apart): a data error, the same on every run, so the bootstrap ends at once."""

JVM_ERRORS: tuple[type[Exception], ...] = (Py4JError, PySparkException)
"""Exceptions a Spark or JVM call can raise; catch these and re-raise a CdcLakeError."""

_TRACEBACK = "Traceback (most recent call last):"
"""The header of a Python traceback, which Spark gives as the message of a Python worker's failure."""
_CAUSED_BY = re.compile(r"^Caused by: (?:[\w$]+\.)*([\w$]+.*)$", re.MULTILINE)
_LOST_TASK = re.compile(
    r"most recent failure: Lost task [^:]*?\): (?:[\w$]+\.)*([\w$]+(?:Exception|Error)\b.*)$", re.MULTILINE
)


def root_cause(exc: BaseException) -> str:
    """The innermost Java cause as ``SimpleClassName: first message line``, else the first line of ``exc``."""
    if isinstance(exc, Py4JJavaError):
        throwable = exc.java_exception
        while throwable.getCause() is not None and not throwable.getCause().equals(throwable):
            throwable = throwable.getCause()
        lines = str(throwable.getMessage() or "").strip().splitlines()
        name = str(throwable.getClass().getSimpleName())
        return f"{name}: {lines[0]}" if lines else name
    return _text_root_cause(str(exc)) or type(exc).__name__


def _text_root_cause(text: str) -> str:
    """From a JVM error's text: the last ``Caused by:``, else the task failure a job abort reports, else
    the first line (class names without their package).  A cause that is a Python worker's traceback
    header is replaced by the traceback's exception line (:func:`_python_exception`)."""
    for pattern in (_CAUSED_BY, _LOST_TASK):
        found = pattern.findall(text)
        if found:
            cause = str(found[-1]).strip()
            if cause.endswith(_TRACEBACK):
                cause = cause.removesuffix(_TRACEBACK) + _python_exception(text)
            return cause
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _python_exception(text: str) -> str:
    """The exception line ending the Python traceback in ``text`` (of the last exception of a chain):
    the last unindented line after the first ``Traceback`` header, before the JVM frames that follow."""
    last = _TRACEBACK
    for line in text[text.find(_TRACEBACK) + len(_TRACEBACK) :].splitlines():
        if line.startswith("\tat ") or line.startswith("Driver stacktrace:"):
            break
        if line.strip() and not line[0].isspace() and not line.startswith(_TRACEBACK):
            last = line.strip()
    return last


def describe_failure(exc: BaseException) -> str:
    """A one-line cause: a cdc-lake error's message, a JVM error's root cause, a Python task's last line."""
    if isinstance(exc, CdcLakeError):
        text = str(exc)
    elif isinstance(exc, JVM_ERRORS):
        text = root_cause(exc)
        python_error = [line for line in str(exc).splitlines() if line.startswith("cdc_lake.exceptions.")]
        if python_error:
            text = python_error[-1].removeprefix("cdc_lake.exceptions.")
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(redact(text).split()) or type(exc).__name__

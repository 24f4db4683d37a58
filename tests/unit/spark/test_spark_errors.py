"""root_cause: a Hudi failure is reported by its deepest Java cause, not by Hudi's wrapper message."""

from __future__ import annotations

from dataclasses import dataclass

from py4j.protocol import Py4JError, Py4JJavaError
from support.spark_failures import RAISED, RECORDED_DROPPED_READ, RECORDED_JOB_ABORT

from cdc_lake.spark.errors import describe_failure, root_cause


@dataclass(eq=False)
class _JavaClass:
    name: str

    def getSimpleName(self) -> str:
        return self.name


@dataclass(eq=False)
class _Throwable:
    """The few methods of java.lang.Throwable that root_cause calls through Py4J."""

    name: str
    message: str | None
    cause: _Throwable | None = None
    _target_id: str = "o1"

    def getCause(self) -> _Throwable | None:
        return self.cause

    def getMessage(self) -> str | None:
        return self.message

    def getClass(self) -> _JavaClass:
        return _JavaClass(self.name)

    def equals(self, other: object) -> bool:
        return self is other


def _java_error(throwable: _Throwable) -> Py4JJavaError:
    return Py4JJavaError("An error occurred while calling o123.save.", throwable)  # type: ignore[no-untyped-call]


def test_the_deepest_java_cause_is_named_not_hudis_wrapper() -> None:
    chain = _Throwable(
        "HoodieException",
        "Failed to write to Hudi",
        _Throwable(
            "HoodieUpsertException",
            "Failed to upsert for commit time 20261123",
            _Throwable("NullPointerException", "Array contains a null element at 2\n\tat org.apache..."),
        ),
    )
    assert root_cause(_java_error(chain)) == "NullPointerException: Array contains a null element at 2"


def test_a_cause_without_message_is_named_by_its_class_and_a_self_cause_ends_the_walk() -> None:
    looping = _Throwable("IllegalStateException", None)
    looping.cause = looping
    wrapped = _Throwable("HoodieException", "Failed", looping)
    assert root_cause(_java_error(wrapped)) == "IllegalStateException"


def test_a_python_error_gives_its_first_line() -> None:
    assert root_cause(ValueError("bad value\nmore detail")) == "bad value"
    assert root_cause(ValueError()) == "ValueError"


def test_a_jvm_failure_is_reduced_to_its_root_cause_in_one_line() -> None:
    assert describe_failure(Py4JError(RECORDED_JOB_ABORT)) == f"RuntimeException: {RAISED}"
    assert describe_failure(Py4JError(RECORDED_DROPPED_READ)) == (
        "PSQLException: An I/O error occurred while sending to the backend."
    )


# A Python worker's failure as Spark reports it (shape of pyspark 3.5.7's job abort text; frames cut):
# the JVM names the Python traceback's first line, the exception is its last line before the JVM frames.
RECORDED_PYTHON_WORKER = (
    "An error occurred while calling o210.save.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 7.0 failed 1 "
    "times, most recent failure: Lost task 0.0 in stage 7.0 (TID 9) (127.0.0.1 executor driver): "
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/venv/pyspark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main\n'
    "    process()\n"
    '  File "/work/cdc_lake/kafka/ranges.py", line 88, in read_range\n'
    "    raise RuntimeError(str(exc))\n"
    "RuntimeError: KafkaError{code=_TRANSPORT,val=-195}\n"
    "\n"
    "During handling of the above exception, another exception occurred:\n"
    "\n"
    "Traceback (most recent call last):\n"
    '  File "/work/cdc_lake/decode/envelope.py", line 12, in decode\n'
    "    row[name]\n"
    "KeyError: 'region'\n"
    "\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException("
    "PythonRunner.scala:572)\n"
    "\tat java.base/java.lang.Thread.run(Thread.java:840)\n"
    "Driver stacktrace:\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)\n"
)


def test_a_python_worker_failure_is_named_by_its_exception_not_the_traceback_header() -> None:
    assert describe_failure(Py4JError(RECORDED_PYTHON_WORKER)) == "PythonException: KeyError: 'region'"

"""root_cause: a Hudi failure is reported by its deepest Java cause, not by Hudi's wrapper message."""

from __future__ import annotations

from dataclasses import dataclass

from py4j.protocol import Py4JJavaError

from cdc_lake.spark.errors import root_cause


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

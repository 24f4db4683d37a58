"""``start_spark``: the session starts on a thread of its own while the command does its other work.

Issue 36 item 7: ``validate`` imported its output and comparison modules and opened the state store
only after the driver JVM was up (about 1 s of a ~18 s command); started first, the JVM comes up while
they load.  The session itself is :func:`get_spark`'s (faked here): the same one, its error raised where
it is waited for.
"""

from __future__ import annotations

import threading

import pytest
from support.spark_settings import Lake, Spark

from cdc_lake.exceptions import ConfigError
from cdc_lake.spark import session


def test_the_session_starts_on_another_thread_and_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    started = threading.Event()
    release = threading.Event()
    threads: list[threading.Thread] = []

    def get_spark(settings: object, lake: object) -> str:
        threads.append(threading.current_thread())
        started.set()
        assert release.wait(10)
        return "the session"

    monkeypatch.setattr(session, "get_spark", get_spark)
    starting = session.start_spark(Spark(), Lake())
    assert started.wait(10)
    assert not starting.done()  # the caller goes on meanwhile
    release.set()
    assert starting.result(10) == "the session"
    assert threads and threads[0] is not threading.current_thread()


def test_a_failed_start_raises_where_it_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    def get_spark(settings: object, lake: object) -> str:
        raise ConfigError("spark.master: no")

    monkeypatch.setattr(session, "get_spark", get_spark)
    starting = session.start_spark(Spark(), Lake())
    with pytest.raises(ConfigError, match=r"spark\.master: no"):
        starting.result(10)

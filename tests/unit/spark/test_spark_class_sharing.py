"""Class-data sharing for the driver JVMs cdc-lake starts (:mod:`cdc_lake.spark.class_sharing`).

Issue 36 item 7: a one-shot verb's JVM spends seconds loading and verifying the same ~12,000 classes every
time.  The rules: one archive per Java runtime and jar set; one writer at a time; the archive appears only
whole (written by the JVM at its exit, renamed into place once the JVM exited cleanly); off by config or
by the user's own sharing options.  The "JVM" here is a real process that behaves as Spark's gateway
does: it runs until its stdin ends, then writes the file it was told to and exits.  That a real driver
maps the archive is ``tests/integration/test_driver_class_sharing.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_lake.spark import class_sharing
from cdc_lake.spark.class_sharing import SharingPlan

JVM_LIKE = """
import sys
from pathlib import Path
sys.stdin.read()  # until the parent closes it, as Spark's gateway server does
target, code = sys.argv[1], int(sys.argv[2])
if target:
    Path(target).write_bytes(b"archive" * 1000)
sys.exit(code)
"""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CDC_LAKE_CACHE", str(tmp_path / "cache"))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    (tmp_path / "jdk" / "lib").mkdir()
    (tmp_path / "jdk" / "lib" / "modules").write_bytes(b"m")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    return tmp_path / "cache" / "class-sharing"


@pytest.fixture
def jar(tmp_path: Path) -> Path:
    path = tmp_path / "hudi.jar"
    path.write_bytes(b"jar")
    return path


def _jvm(writing: Path | None, code: int = 0) -> subprocess.Popen[bytes]:
    target = "" if writing is None else str(writing)
    return subprocess.Popen([sys.executable, "-c", JVM_LIKE, target, str(code)], stdin=subprocess.PIPE)


def _writer(jar: Path) -> SharingPlan:
    sharing = class_sharing.plan([jar], "-Dmine=1", enabled=True)
    assert sharing is not None and sharing.writing is not None and sharing.lock is not None
    assert sharing.options == (f"-XX:ArchiveClassesAtExit={sharing.writing}",)
    return sharing


def test_the_first_driver_writes_the_archive_and_the_next_maps_it(cache: Path, jar: Path) -> None:
    sharing = _writer(jar)
    assert sharing.lock is not None and sharing.lock.exists() and not sharing.archive.exists()
    assert sharing.writing is not None and sharing.writing.parent == cache
    class_sharing.finish(sharing, _jvm(sharing.writing))
    assert sharing.archive.read_bytes() == b"archive" * 1000
    assert sorted(p.name for p in cache.iterdir()) == [sharing.archive.name]  # no lock, no partial left
    again = class_sharing.plan([jar], "", enabled=True)
    assert again == SharingPlan((f"-XX:SharedArchiveFile={sharing.archive}",), sharing.archive)


def test_one_writer_at_a_time_and_others_start_without_sharing(jar: Path) -> None:
    sharing = _writer(jar)
    assert class_sharing.plan([jar], "", enabled=True) is None
    class_sharing.finish(sharing, _jvm(sharing.writing))
    assert class_sharing.plan([jar], "", enabled=True) is not None


def test_a_stale_lock_of_a_dead_writer_is_taken_over(jar: Path) -> None:
    sharing = _writer(jar)
    assert sharing.lock is not None
    old = time.time() - class_sharing.STALE_SECONDS - 5
    os.utime(sharing.lock, (old, old))
    taken = _writer(jar)
    assert taken.lock == sharing.lock
    class_sharing.finish(taken, _jvm(taken.writing))
    assert taken.archive.is_file()


def test_a_jvm_that_fails_leaves_no_archive_and_frees_the_lock(jar: Path) -> None:
    sharing = _writer(jar)
    class_sharing.finish(sharing, _jvm(sharing.writing, code=3))
    assert not sharing.archive.exists()
    assert sharing.writing is not None and not sharing.writing.exists()
    assert _writer(jar).writing is not None  # the next process tries again


def test_a_driver_that_never_started_frees_the_lock(jar: Path) -> None:
    sharing = _writer(jar)
    class_sharing.finish(sharing, None)
    assert not sharing.archive.exists()
    assert _writer(jar).lock is not None


def test_a_long_lived_driver_maps_the_archive_but_never_writes_it(jar: Path) -> None:
    assert class_sharing.plan([jar], "", enabled=True, may_write=False) is None
    sharing = _writer(jar)
    class_sharing.finish(sharing, _jvm(sharing.writing))
    mapped = class_sharing.plan([jar], "", enabled=True, may_write=False)
    assert mapped is not None and mapped.writing is None and mapped.archive == sharing.archive


def test_off_by_config_or_by_the_users_own_sharing_options(jar: Path) -> None:
    assert class_sharing.plan([jar], "", enabled=False) is None
    for option in ("-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/mine.jsa"):
        assert class_sharing.plan([jar], f"-Dx=1 {option}", enabled=True) is None


def test_a_new_jar_set_or_java_runtime_gets_an_archive_of_its_own(
    tmp_path: Path, jar: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java = class_sharing.java_executable()
    assert java is not None
    key = class_sharing.archive_key(java, [jar])
    assert class_sharing.archive_key(java, [jar]) == key
    assert class_sharing.archive_key(java, [jar], packages="org.example:x:1") != key
    assert class_sharing.archive_key(java, [jar], on_classpath=True) != key
    other = tmp_path / "other.jar"
    other.write_bytes(b"j")
    assert class_sharing.archive_key(java, [jar, other]) != key
    jar.write_bytes(b"a rebuilt jar")
    assert class_sharing.archive_key(java, [jar]) != key
    rebuilt = class_sharing.archive_key(java, [jar])
    (java.parent.parent / "lib" / "modules").write_bytes(b"an upgraded runtime")
    assert class_sharing.archive_key(java, [jar]) != rebuilt


def test_the_archives_last_used_are_kept(cache: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.jar"
    first.write_bytes(b"j")
    sharing = _writer(first)
    class_sharing.finish(sharing, _jvm(sharing.writing))
    old = time.time() - 1000
    os.utime(sharing.archive, (old, old))
    for number in range(class_sharing.KEEP_ARCHIVES):
        assert class_sharing.plan([first], "", True) is not None  # in use: its time is now
        jar = tmp_path / f"later{number}.jar"
        jar.write_bytes(b"j")
        later = _writer(jar)
        class_sharing.finish(later, _jvm(later.writing))
    assert sharing.archive.is_file()
    assert len(list(cache.glob("*.jsa"))) == class_sharing.KEEP_ARCHIVES


def test_only_the_newest_archives_are_kept(cache: Path, tmp_path: Path) -> None:
    jars = []
    for number in range(class_sharing.KEEP_ARCHIVES + 2):
        jar = tmp_path / f"set{number}.jar"
        jar.write_bytes(b"j")
        jars.append(jar)
        sharing = _writer(jar)
        class_sharing.finish(sharing, _jvm(sharing.writing))
        stamp = time.time() - 100 + number
        os.utime(sharing.archive, (stamp, stamp))
    kept = sorted(cache.glob("*.jsa"))
    assert len(kept) == class_sharing.KEEP_ARCHIVES
    newest = {class_sharing.plan([j], "", True) for j in jars[-class_sharing.KEEP_ARCHIVES :]}
    assert all(s is not None and s.writing is None for s in newest)


def test_without_java_nothing_is_shared(jar: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", "/nowhere")
    assert class_sharing.plan([jar], "", enabled=True) is None

"""Class-data sharing for the driver JVMs cdc-lake starts: the classes a cold JVM loads, kept once.

A one-shot verb (``validate``, ``apply --once``, ``bootstrap``) spends much of its short life loading,
parsing and verifying classes: about 12,000 of them (Spark, Hadoop, Hudi, Jackson, Parquet, ...) for a
small ``validate``.  HotSpot's dynamic class-data sharing (JDK 13 and newer) writes the classes a JVM
loaded into an archive when it exits (``-XX:ArchiveClassesAtExit``) and maps them, already parsed and
verified, into the next JVM (``-XX:SharedArchiveFile``): on this project's 2-core machine a session
start plus a first job went from 9.2-9.9 s to 5.8-7.3 s (docs/benchmarks.md, "time to the first answer").

An archive belongs to one Java runtime and one classpath, so its name is a digest of the java Spark's
launcher runs (``$JAVA_HOME/bin/java``, else ``java`` on the PATH, with its runtime image's size and
time), pyspark's version and folder, and the driver's jars (paths, sizes, times, and whether they are
on the classpath): a new JDK, pyspark or jar set makes a new archive, and the :data:`KEEP_ARCHIVES`
last used are kept under ``<cache>/class-sharing/``.

- An archive exists: the driver starts with ``-XX:SharedArchiveFile``.  A JVM that cannot map it (a heap
  across 32 GB, a runtime rebuilt in place) says so on its stdout, which cdc-lake discards, and runs
  without it: slower, never wrong.
- None exists: one process at a time, never a long-lived one such as ``run`` (whose exit may be days
  away), writes it (a lock file created exclusively; one older than
  :data:`STALE_SECONDS` belonged to a process that died) starts its driver with
  ``-XX:ArchiveClassesAtExit`` to a file of its own.  When that process ends, :func:`finish` closes the
  JVM's stdin (Spark's gateway then exits the JVM), waits for the JVM to write the archive and renames it
  into place, so no JVM ever maps a half-written archive.  Only that first process pays, at its exit:
  about 2 s and 130 MB of disk.
- ``spark.class_data_sharing: false`` turns it off, and a driver option of the user's own about sharing
  (:data:`USER_OPTIONS`) wins.  Under spark-submit the driver JVM already runs: nothing is done.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyspark

from cdc_lake import jvm

_LOG = logging.getLogger(__name__)

USER_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")
"""Options by which a user's ``spark.driver.extraJavaOptions`` already decides class sharing."""

STALE_SECONDS = 600.0
"""A writer's lock or unfinished archive this old belongs to a process that died."""

DUMP_WAIT_SECONDS = 120.0
"""How long a writing process waits at its exit for its JVM to write the archive."""

KEEP_ARCHIVES = 3
"""Archives kept (the last used): one per Java runtime and jar set in use."""


@dataclass(frozen=True)
class SharingPlan:
    """The driver options of one JVM start, and where its archive is (or is to be) written."""

    options: tuple[str, ...]
    archive: Path
    writing: Path | None = None
    """The file this process's JVM writes at its exit, renamed to ``archive`` by :func:`finish`."""
    lock: Path | None = None


def folder() -> Path:
    """Where the archives live."""
    return jvm.cache_root() / "class-sharing"


def java_executable() -> Path | None:
    """The java Spark's launcher (``spark-class``) runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if found is None or not Path(found).exists():
        return None
    return Path(found).resolve()


def _stat_text(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def archive_key(
    java: Path, jars: Sequence[str | os.PathLike[str]], packages: str = "", on_classpath: bool = False
) -> str:
    """The digest naming the archive of one Java runtime and one driver classpath (``jars`` on the JVM's
    classpath, or loaded by Spark from ``spark.jars``)."""
    parts = [
        _stat_text(java),
        _stat_text(java.parent.parent / "lib" / "modules"),
        f"pyspark:{pyspark.__version__}:{Path(pyspark.__file__).parent}",
        f"packages:{packages}",
        f"on classpath:{on_classpath}",
        *(_stat_text(Path(jar)) for jar in jars),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _take_lock(lock: Path) -> bool:
    """Create ``lock`` exclusively (replacing a stale one); False when another live process holds it."""
    for _ in range(2):
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - lock.stat().st_mtime > STALE_SECONDS:
                    lock.unlink()
                    continue
            return False
        os.write(descriptor, str(os.getpid()).encode())
        os.close(descriptor)
        return True
    return False


def _remove_stale(directory: Path) -> None:
    """Unfinished archives of writers that died long ago."""
    for partial in directory.glob("*.partial"):
        with contextlib.suppress(OSError):
            if time.time() - partial.stat().st_mtime > STALE_SECONDS:
                partial.unlink()


def plan(
    jars: Sequence[str | os.PathLike[str]],
    driver_options: str,
    enabled: bool,
    packages: str = "",
    on_classpath: bool = False,
    may_write: bool = True,
) -> SharingPlan | None:
    """The class-sharing options for a driver JVM about to start with ``jars`` (on its classpath or in
    ``spark.jars``) and ``packages``, or None: sharing turned off, decided by the user's own
    ``driver_options``, no java found, no archive yet and this driver not to write it (``may_write``
    false: a long-lived one), or another process writing it right now."""
    if not enabled or any(option.startswith(USER_OPTIONS) for option in driver_options.split()):
        return None
    java = java_executable()
    if java is None:
        return None
    directory = folder()
    key = archive_key(java, jars, packages, on_classpath)
    archive = directory / f"{key}.jsa"
    if archive.is_file():
        _LOG.debug("class-data sharing: mapping %s", archive)
        with contextlib.suppress(OSError):
            os.utime(archive)  # last used now: the archives kept are the ones in use
        return SharingPlan((f"-XX:SharedArchiveFile={archive}",), archive)
    if not may_write:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _LOG.debug("class-data sharing off: %s", exc)
        return None
    lock = directory / f"{key}.lock"
    if not _take_lock(lock):
        return None
    _remove_stale(directory)
    writing = directory / f"{key}.{os.getpid()}.partial"
    _LOG.debug("class-data sharing: this driver writes %s at its exit", archive)
    return SharingPlan((f"-XX:ArchiveClassesAtExit={writing}",), archive, writing, lock)


def _keep_last_used(directory: Path) -> None:
    archives = sorted(directory.glob("*.jsa"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in archives[KEEP_ARCHIVES:]:
        with contextlib.suppress(OSError):
            old.unlink()


def finish(sharing: SharingPlan, process: subprocess.Popen[bytes] | None) -> None:
    """At the exit of a process whose driver writes the archive: end the JVM, wait for its archive and put
    it in place (atomically), then release the lock.  A JVM that fails or takes longer than
    :data:`DUMP_WAIT_SECONDS` leaves no archive, and so does ``process`` None (the JVM did not start); the
    next process tries again."""
    if sharing.writing is None or sharing.lock is None:
        return
    try:
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # Spark's gateway server exits its JVM at end of input
        try:
            returncode = process.wait(DUMP_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            _LOG.debug("class-data sharing: the driver did not exit within %.0f s", DUMP_WAIT_SECONDS)
            return
        if returncode == 0 and sharing.writing.is_file() and sharing.writing.stat().st_size > 0:
            sharing.writing.replace(sharing.archive)
            _keep_last_used(sharing.archive.parent)
            _LOG.debug("class-data sharing: wrote %s", sharing.archive)
    finally:
        with contextlib.suppress(OSError):
            sharing.writing.unlink()
        with contextlib.suppress(OSError):
            sharing.lock.unlink()

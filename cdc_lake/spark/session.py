"""One SparkSession per process, configured for the lake format and, when the lake is on S3, for S3A.

The settings arrive as the config models (``SparkSettings`` and ``LakeSettings``);
they are typed here with small read-only protocols so this module depends only on
their shape.  :func:`spark_conf` is pure (it computes the Spark properties) and
:func:`get_spark` starts or returns the cached session.  What the format needs of the session (its
jars, its settings, a class that shows its jars are loaded) are its facts
(:class:`~cdc_lake.lake.format.FormatFacts`), asked by ``lake.format`` name.

Credentials never go on a command line.  When cdc-lake starts its own driver JVM, pyspark runs
``spark-submit --conf KEY=VALUE …`` and any local user reads that with ``ps``: the JVM is started
with :func:`launch_conf` (every property whose name marks a credential left out, the S3A access and
secret keys among them), and the full conf, keys included, is handed to the running JVM through the
py4j gateway when the SparkContext is created.  The ``spark.hadoop.fs.s3a.*`` keys then reach
everything that reads S3: the driver's Hadoop configuration is built from them when the context
starts (and Spark SQL and Hudi ship it to their tasks), and executors of a standalone (or YARN,
Kubernetes) cluster fetch the driver's whole conf over the authenticated RPC channel when they
register: only ``spark.auth*``, ``spark.rpc*``, ``spark.network*``, ``spark.ssl*`` and port
settings go on an executor's command line (``SparkConf.isExecutorStartupConf``).
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from enum import Enum
from pathlib import Path
from typing import Protocol

import pyspark
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from cdc_lake import jvm
from cdc_lake.exceptions import ConfigError
from cdc_lake.lake.format import FormatFacts, format_facts
from cdc_lake.redaction import is_secret_key
from cdc_lake.spark import class_sharing

# Settings cdc-lake's own writes and reads need, whatever the format (whose own required settings are
# its facts' ``spark_conf``); a user conf may not contradict them.
PRODUCT_REQUIRED_CONF: Mapping[str, str] = {
    # Dates and timestamps are proleptic Gregorian end to end (Postgres, MySQL, Debezium, Python): write
    # and read them as they are.  Spark's default refuses dates before 1582-10-15 and timestamps before
    # 1900 ("WRITE_ANCIENT_DATETIME"), so a year-1 date could not be replicated at all.
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    "spark.sql.avro.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.avro.datetimeRebaseModeInRead": "CORRECTED",
}

DEFAULT_DRIVER_MEMORY = "1g"
"""spark-submit's default ``spark.driver.memory`` (and the config's)."""

# Sized for a small machine (2 cores, 1 GB driver); every key can be overridden in ``spark.conf``.
SMALL_FOOTPRINT_DEFAULTS: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}

TABLE_SERVICES_POOL = "table-services"
"""The fair-scheduler pool ``run``'s table-service thread submits its Spark jobs to (:func:`use_pool`)."""

VALIDATION_POOL = "validation"
"""The fair-scheduler pool ``run``'s continuous validation submits its Spark jobs to (:func:`use_pool`)."""

SCHEDULER_DEFAULTS: Mapping[str, str] = {
    "spark.scheduler.mode": "FAIR",
    "spark.scheduler.allocation.file": str(Path(__file__).with_name("fairscheduler.xml")),
}
"""Spark's fair scheduler, with the pools of ``fairscheduler.xml``: the applier's jobs run in the
``default`` pool (weight 2, one slot first), the table-service thread's in :data:`TABLE_SERVICES_POOL`
and continuous validation's in :data:`VALIDATION_POOL` (weight 1 each).  Under Spark's FIFO default a
compaction's tasks took every core until they were all done, and the commit that came meanwhile waited
for the whole compaction (issue 35: 68-70 s at 10M rows on the bucket index); the fair scheduler gives
the next free core to the applier's job instead.  A task already
running is not stopped.  Both keys can be overridden in ``spark.conf``."""

LOCAL_PYTHON_DAEMON = "cdc_lake.spark.daemon"
"""In local mode the Python workers are forked from a daemon that imported cdc-lake's decoding
(:mod:`cdc_lake.spark.daemon`).  Not on a cluster: executors without cdc-lake (no environment shipped)
could not start that daemon at all, and ``cdc-lake spark check`` would lose the worker's
"No module named 'cdc_lake'" it names the setting by."""


JOL_JAVA_OPTIONS = ("-Djol.skipHotspotSAAttach=true",)
"""Hudi sizes the records it keeps in memory with its bundled JOL, whose first use in a JVM tried to attach
the HotSpot Serviceability Agent and failed ("Unable to attach Serviceability Agent"): 2.5 to 3.7 s of
the first ``ObjectSizeCalculator.getObjectSize`` in a fresh driver, 0.4 to 0.7 s without it (the same
sizes, from the running JVM), paid by every ``validate`` and ``apply`` process (issue 36 item 7).  Set
on the driver cdc-lake starts and on a cluster's executors, after the user's own options."""

JAVA_OPTIONS_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


class SecretLike(Protocol):
    """A secret that only reveals its value on request (pydantic ``SecretStr``)."""

    def get_secret_value(self) -> str:
        """Return the plain value."""
        ...


class S3SettingsLike(Protocol):
    """The S3-compatible object store holding the lake."""

    @property
    def endpoint(self) -> str | None: ...

    @property
    def region(self) -> str | None: ...

    @property
    def access_key(self) -> SecretLike | None: ...

    @property
    def secret_key(self) -> SecretLike | None: ...

    @property
    def path_style_access(self) -> bool: ...


class SparkSettingsLike(Protocol):
    """The ``spark`` section of the config."""

    @property
    def master(self) -> str: ...

    @property
    def app_name(self) -> str: ...

    @property
    def driver_memory(self) -> str: ...

    @property
    def jars(self) -> Sequence[str | os.PathLike[str]]: ...

    @property
    def conf(self) -> Mapping[str, object]: ...

    @property
    def class_data_sharing(self) -> bool: ...


class LakeSettingsLike(Protocol):
    """The part of the ``lake`` section the session needs: the format and where the object store is."""

    @property
    def format(self) -> str: ...

    @property
    def s3(self) -> S3SettingsLike | None: ...


_lock = threading.Lock()
_session: SparkSession | None = None
_after_start: list[Callable[[SparkSession], object]] = []
_LOG = logging.getLogger(__name__)


def _conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def s3a_conf(s3: S3SettingsLike) -> dict[str, str]:
    """Hadoop S3A properties (as ``spark.hadoop.*``) for an S3-compatible endpoint."""
    prefix = "spark.hadoop.fs.s3a."
    conf = {
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        f"{prefix}path.style.access": _conf_value(s3.path_style_access),
        # Keep directory markers: S3A otherwise bulk-deletes every parent marker after each write,
        # which costs a request per file on any store and fails on stores that map markers to real
        # directories (e.g. file-system-backed gateways) while the directory has children.
        f"{prefix}directory.marker.retention": "keep",
    }
    if s3.endpoint:
        conf[f"{prefix}endpoint"] = s3.endpoint
        conf[f"{prefix}connection.ssl.enabled"] = _conf_value(not s3.endpoint.startswith("http://"))
    if s3.region:
        conf[f"{prefix}endpoint.region"] = s3.region
    if s3.access_key is not None and s3.secret_key is not None:
        conf[f"{prefix}aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        conf[f"{prefix}access.key"] = s3.access_key.get_secret_value()
        conf[f"{prefix}secret.key"] = s3.secret_key.get_secret_value()
    return conf


def _check_submitted(settings: SparkSettingsLike, submitted: Mapping[str, str]) -> None:
    """Refuse a config that contradicts the spark-submit command line that started the driver."""
    master = submitted.get("spark.master", "")
    if settings.master != master:
        raise ConfigError(
            f"spark.master: the config says '{settings.master}' but spark-submit started this driver "
            f"with --master '{master}'; set the same master in both"
        )
    memory = submitted.get("spark.driver.memory", DEFAULT_DRIVER_MEMORY)
    if settings.driver_memory != memory:
        raise ConfigError(
            f"spark.driver_memory: the config says '{settings.driver_memory}' but spark-submit started "
            f"this driver with '{memory}'; pass --driver-memory {settings.driver_memory} or change the config"
        )
    if settings.jars:
        raise ConfigError(
            "spark.jars: under spark-submit the driver's jars come from its --jars or --packages "
            "(`cdc-lake spark jars` prints them); leave spark.jars empty"
        )


def spark_conf(
    settings: SparkSettingsLike,
    lake: LakeSettingsLike,
    jars: Sequence[str | os.PathLike[str]],
    submitted: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Every Spark property the session is built with; the result holds secrets, never log it.

    ``submitted`` is the conf spark-submit started the driver with, when it did (see
    :func:`submitted_conf`): then the command line has decided the master, the driver's memory,
    jars and Python, and the config may only agree with it.
    """
    defaults = {**SMALL_FOOTPRINT_DEFAULTS, **SCHEDULER_DEFAULTS}
    conf: dict[str, str] = {k: v for k, v in defaults.items() if k not in (submitted or {})}
    conf["spark.app.name"] = settings.app_name
    if submitted is not None:
        _check_submitted(settings, submitted)
    else:
        conf.update(
            {
                "spark.master": settings.master,
                "spark.driver.memory": settings.driver_memory,
                # Python workers must run the interpreter that has cdc_lake installed.
                "spark.pyspark.python": sys.executable,
                "spark.pyspark.driver.python": sys.executable,
            }
        )
        if settings.master.startswith("local"):
            conf["spark.driver.host"] = "127.0.0.1"
            conf["spark.driver.bindAddress"] = "127.0.0.1"
            conf["spark.python.daemon.module"] = LOCAL_PYTHON_DAEMON
    if jars:
        conf["spark.jars"] = ",".join(os.fspath(j) for j in jars)
    if lake.s3 is not None:
        conf.update(s3a_conf(lake.s3))
    facts = format_facts(lake.format)
    for key, value in settings.conf.items():
        text = _conf_value(value)
        for needs, required in (
            (f"the lake format ({facts.name})", facts.spark_conf),
            ("cdc-lake", PRODUCT_REQUIRED_CONF),
        ):
            if key in required and text != required[key]:
                raise ConfigError(
                    f"spark.conf.{key}: {needs} needs '{required[key]}', the config sets '{text}'"
                )
        conf[key] = text
    conf.update(facts.spark_conf)
    conf.update(PRODUCT_REQUIRED_CONF)
    for key in JAVA_OPTIONS_KEYS:
        if submitted is not None and key == "spark.driver.extraJavaOptions":
            continue  # the running driver's options are spark-submit's
        given = conf.get(key, (submitted or {}).get(key, "")).split()
        conf[key] = " ".join([*given, *(option for option in JOL_JAVA_OPTIONS if option not in given)])
    return conf


def launch_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The part of ``conf`` that may start the driver JVM: everything but credentials.

    It becomes spark-submit's command line; the rest is set on the running JVM (see the module).
    """
    return {key: value for key, value in conf.items() if not is_secret_key(key)}


QUIET_LOG4J2 = """\
# Written by cdc-lake: Spark's warnings to stderr, without its start-up chatter (-v shows it all).
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.mac.name = io.netty.util.internal.MacAddressUtil
logger.mac.level = error
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = off
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = off
logger.blocks.name = org.apache.spark.storage.BlockManager
logger.blocks.level = error
"""
"""A root level equal to the one Spark sets for PySpark (WARN) keeps Spark from printing "Setting
default log level"; NativeCodeLoader's and netty's start-up warnings are silenced by name.  A failed
task's executor trace ("Lost task", BlockManager warnings) is not printed: the command's error line
names the root cause (:mod:`cdc_lake.spark.errors`) and the log has the whole trace at INFO (``-v``)."""

QUIET_JAVA_OPTIONS = ("-Djdk.attach.allowAttachSelf=true",)
"""Hudi's bundled JOL warns "Unable to get Instrumentation" unless the JVM may attach to itself."""


def quiet_conf(conf: Mapping[str, str], log4j2_file: Path) -> dict[str, str]:
    """``conf`` with the driver's Java options extended so Spark and JOL start without chatter."""
    options = [f"-Dlog4j2.configurationFile=file:{log4j2_file}", *QUIET_JAVA_OPTIONS]
    existing = conf.get("spark.driver.extraJavaOptions", "")
    return {**conf, "spark.driver.extraJavaOptions": " ".join(filter(None, [existing, *options]))}


def _quiet_log4j2_file() -> Path:
    path = jvm.cache_root() / "log4j2-quiet.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(QUIET_LOG4J2)
    return path


DIST_CLASSPATH = "SPARK_DIST_CLASSPATH"
"""Entries Spark's launcher appends to the driver JVM's classpath, after Spark's own jars."""


def _launch_gateway(
    conf: Mapping[str, str], verbose: bool, classpath: Sequence[str | os.PathLike[str]] = ()
) -> None:
    """Start the driver JVM with its stdout sent to stderr (-v) or discarded, never to our stdout, and
    ``classpath`` appended to its classpath (see :func:`_launch_own_jvm`).

    Spark logs to stderr; what the JVM prints on stdout is chatter (Hudi's JOL prints its
    "# WARNING: Unable to attach Serviceability Agent" there) that would corrupt ``--json`` output.
    """
    if SparkContext._gateway is not None:
        return
    launch_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    stdout = sys.stderr if verbose else subprocess.DEVNULL
    before = os.environ.get(DIST_CLASSPATH)
    if classpath:
        # pyspark hands the launcher a copy of os.environ: set for this launch only.
        entries = [os.fspath(entry) for entry in classpath]
        os.environ[DIST_CLASSPATH] = os.pathsep.join([*filter(None, [before]), *entries])
    try:
        gateway = launch_gateway(launch_conf, popen_kwargs={"stdout": stdout})  # type: ignore[no-untyped-call]
    finally:
        if before is None:
            os.environ.pop(DIST_CLASSPATH, None)
        else:
            os.environ[DIST_CLASSPATH] = before
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def submitted_conf() -> dict[str, str] | None:
    """The Spark conf spark-submit started this driver with, or None when cdc-lake starts its own JVM.

    spark-submit runs a Python application with its JVM already up and passes the gateway's port
    in ``PYSPARK_GATEWAY_PORT``; its ``--master``, ``--conf`` and the like are the JVM's ``spark.*``
    system properties.
    """
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()  # type: ignore[attr-defined]
    return dict(SparkConf().getAll())


class DriverLife(Enum):
    """How long a process's driver is expected to live: it decides two of its JVM's options."""

    ONE_SHOT = "one-shot"
    """A command that ends when its work is done (the default): the first one writes the class-sharing
    archive at its exit (:mod:`cdc_lake.spark.class_sharing`)."""
    SMALL = "small"
    """A one-shot command with little to do: its driver also runs :data:`SHORT_LIVED_JAVA_OPTIONS`."""
    SERVICE = "service"
    """Runs until stopped (``run``, ``apply`` without ``--once``): maps the class-sharing archive but never
    writes it, since its exit, and the writer's lock with it, may be days away."""


SHORT_LIVED_JAVA_OPTIONS: Mapping[str, re.Pattern[str]] = {
    "-XX:TieredStopAtLevel=1": re.compile(r"-XX:(TieredStopAtLevel=\d+|[+-]TieredCompilation)|-Xint|-Xcomp"),
    "-XX:+UseSerialGC": re.compile(r"-XX:[+-]Use\w*GC"),
}
"""A short-lived driver's options (:attr:`DriverLife.SMALL`), each with the
pattern of the user's own options (``spark.driver.extraJavaOptions``, ``SPARK_SUBMIT_OPTS``) that decide
the same thing (then it is left out).  HotSpot's C2 compiler costs a cold driver seconds of CPU on two
cores before its code pays off: the C1 compiler alone and the serial collector cut ``apply --once`` of
30 messages from 14.2-14.3 s to 10.4-12.1 s, while a 200,000-change ``apply`` into a 1M-row table took
12 % and 53 % longer with them in two pairs (60.8 s against 54.1 s, 86.6 s against 56.7 s).  So only for
small work (docs/benchmarks.md, "time to the first answer")."""


def short_lived_options(driver_options: str) -> tuple[str, ...]:
    """The :data:`SHORT_LIVED_JAVA_OPTIONS` that the user's own ``driver_options`` (and
    ``SPARK_SUBMIT_OPTS``) leave to cdc-lake."""
    given = [*driver_options.split(), *os.environ.get("SPARK_SUBMIT_OPTS", "").split()]
    return tuple(
        option
        for option, decided in SHORT_LIVED_JAVA_OPTIONS.items()
        if not any(decided.fullmatch(word) for word in given)
    )


def _require_format_on_classpath(facts: FormatFacts) -> None:
    """Under spark-submit the driver's classpath is fixed: name the missing argument, not a Spark trace."""
    jvm = SparkContext._jvm
    assert jvm is not None
    if not jvm.org.apache.spark.util.Utils.classIsLoadable(facts.spark_probe_class):
        raise ConfigError(
            f"spark-submit: the lake format ({facts.name}) is not on the driver's classpath; "
            'pass --jars "$(cdc-lake spark jars)" '
            'or --packages "$(cdc-lake spark jars --coordinates)" '
            '--exclude-packages "$(cdc-lake spark jars --excludes)" (docs/deploy.md)'
        )


def _alive(session: SparkSession) -> bool:
    return session.sparkContext._jsc is not None


PACKAGES_KEY = "spark.jars.packages"


def driver_jars(settings: SparkSettingsLike, lake_format: str) -> list[str | os.PathLike[str]]:
    """The jars cdc-lake hands a driver JVM it starts (``spark.jars``).

    The config's ``spark.jars`` when it lists any; none when ``spark.conf`` sets
    ``spark.jars.packages`` (Spark resolves those Maven coordinates itself when the JVM starts);
    otherwise the lake format's (``lake_format``), Avro, S3A, Kafka and JDBC set resolved through
    Maven once.
    """
    if settings.jars:
        return list(settings.jars)
    if PACKAGES_KEY in settings.conf:
        return []
    return list(jvm.resolve(jvm.spark_jars(pyspark.__version__, lake_format)))


def _launch_own_jvm(settings: SparkSettingsLike, lake: LakeSettingsLike, life: DriverLife) -> dict[str, str]:
    """Start the driver JVM as spark-submit would, with the config's master, jars and Python, and the
    options its expected ``life`` calls for.

    In local mode the jars go on the JVM's classpath, after Spark's own (``SPARK_DIST_CLASSPATH``),
    instead of ``spark.jars``: the executor is the driver JVM, and with ``spark.jars`` its first task
    copied every jar (355 MB with Hudi's bundle) into the application's scratch folder and loaded them
    through a class loader of its own, in every process.  Spark's classes still come first, as with
    ``spark.jars`` (whose loader asks Spark's first), and the jars' classes join the class-sharing
    archive.  Measured: a session and its first job 8.3-8.9 s -> 6.9-7.6 s (docs/benchmarks.md, "time to
    the first answer").  On a cluster the executors need ``spark.jars``.
    """
    jars = driver_jars(settings, lake.format)
    local = settings.master.startswith("local")
    if local:
        # Read by the JVM launcher before any conf applies: keeps Spark's own lookups on loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = spark_conf(settings, lake, [] if local else jars)
    # PySpark takes the executors' interpreter from this variable, not from spark.pyspark.python: on a
    # cluster the default ("python3" on the worker's PATH) lacks cdc_lake and its dependencies.
    os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    # Spark's own warnings only with -v (cdc-lake's logging at INFO or below).
    verbose = logging.getLogger().isEnabledFor(logging.INFO)
    if not verbose:
        conf = quiet_conf(conf, _quiet_log4j2_file())
    driver_options = conf.get("spark.driver.extraJavaOptions", "")
    packages = conf.get(PACKAGES_KEY, "")
    may_write = life is not DriverLife.SERVICE
    enabled = settings.class_data_sharing
    sharing = class_sharing.plan(jars, driver_options, enabled, packages, local, may_write)
    launch = launch_conf(conf)
    added = list(sharing.options) if sharing is not None else []
    if life is DriverLife.SMALL:
        added += short_lived_options(driver_options)
    if added:
        launch["spark.driver.extraJavaOptions"] = " ".join(filter(None, [driver_options, *added]))
    try:
        _launch_gateway(launch, verbose, jars if local else ())
    except BaseException:
        if sharing is not None:
            class_sharing.finish(sharing, None)  # no JVM: nothing to wait for, the lock released
        raise
    if sharing is not None and sharing.writing is not None:
        gateway = SparkContext._gateway
        atexit.register(class_sharing.finish, sharing, getattr(gateway, "proc", None))
    return conf


def get_spark(
    settings: SparkSettingsLike, lake: LakeSettingsLike, *, life: DriverLife = DriverLife.ONE_SHOT
) -> SparkSession:
    """Return the process-wide SparkSession, starting it with the lake format's (and S3A) settings on
    first use.

    Jars come from ``spark.jars`` when the config lists any, otherwise from the
    Maven-resolved set of the format's jars, spark-avro and hadoop-aws (downloaded once).
    When spark-submit started this process, its JVM is the driver: its command line has set
    the master, the jars and the executors' Python, and the config must agree with it.
    Later calls return the same session whatever settings they pass.  ``life``: how long the caller's
    driver is expected to live (:class:`DriverLife`).
    """
    global _session
    with _lock:
        if _session is not None and _alive(_session):
            return _session
        submitted = submitted_conf()
        if submitted is not None:
            # spark-submit set the driver's classpath and the executors' Python (PYSPARK_PYTHON).
            conf = spark_conf(settings, lake, [], submitted)
            _require_format_on_classpath(format_facts(lake.format))
        else:
            conf = _launch_own_jvm(settings, lake, life)
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        _session = session
        for hook in _after_start:
            hook(session)
        return session


def _import(name: str) -> None:
    """Import module ``name`` (in a Python worker: this module is imported there first)."""
    importlib.import_module(name)


def after_start(hook: Callable[[SparkSession], object]) -> None:
    """Call ``hook(session)`` each time :func:`get_spark` starts the process-wide session from now on (not
    for one already running)."""
    with _lock:
        _after_start.append(hook)


def warm_python_workers(spark: SparkSession, modules: Sequence[str]) -> threading.Thread:
    """Start a Python worker and import ``modules`` in it, on a daemon thread: one task, whose worker the
    next Python job of the same application reuses (``spark.python.worker.reuse``).

    ``apply``'s first batch otherwise started the worker (``pyspark.daemon``) and imported cdc-lake's
    decoding in it only when its decode job ran, after the driver's planning (issue 36 item 7).  A failed
    warm-up is logged at DEBUG and left to the job that needs the worker.
    """
    wanted = list(modules)

    def warm() -> None:
        try:
            spark.sparkContext.parallelize(wanted, 1).foreach(_import)
        except Exception as exc:  # a warm-up only; the job that needs the worker reports a real failure
            _LOG.debug("warming a Python worker failed: %s", exc)

    thread = threading.Thread(target=warm, name="cdc-lake-python-warm-up", daemon=True)
    thread.start()
    return thread


def start_spark(settings: SparkSettingsLike, lake: LakeSettingsLike) -> Future[SparkSession]:
    """:func:`get_spark` on a thread of its own: the driver JVM comes up while the caller does work that
    needs no Spark (imports, the state store, the source), and waits for the session only where it needs
    it (``result()``, which raises what the start raised)."""
    future: Future[SparkSession] = Future()

    def start() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(get_spark(settings, lake))
        except BaseException as exc:  # handed to the waiting caller
            future.set_exception(exc)

    threading.Thread(target=start, name="cdc-lake-spark-start").start()
    return future


def stop_spark() -> None:
    """Stop the process-wide session if one is running (the next :func:`get_spark` starts a new one)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None


def use_pool(spark: SparkSession, pool: str) -> None:
    """Submit the Spark jobs the calling thread starts from now on to the fair-scheduler pool ``pool``
    (:data:`SCHEDULER_DEFAULTS`); threads the caller starts afterwards inherit it."""
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)

"""``cdc-lake repair``: make the keys where a lake table differs from its source exact, without a copy.

Which keys: those of a ``cdc-lake validate --json`` output (``--keys FILE``: its missing, extra,
different and duplicate keys, or a JSON list of key objects), else those a validation run first finds
(:func:`cdc_lake_bootstrap.validate.validate_table`), or with ``--resume`` those of the table's last
repair that did not finish.  Every key is cast to the lake's key types through Spark (JSON numbers and
strings; timestamps and dates as ISO text, decimals as text, binary as hex: what ``validate --json``
prints).

What happens to them is the applier's (:mod:`cdc_lake.apply.repair`, through the :class:`Repair` the
command line passes): while the table's apply lock is held, this module reads the keys' rows from the
read replica (as ``validate`` reads it: :func:`cdc_lake_bootstrap.validate.source_frame`, after the
replica passed the primary's position), takes the replica's position once read as the read point, waits
until Debezium committed past it (the bootstrap's hand-off wait,
:func:`cdc_lake_bootstrap.handoff.wait_until_streamed`) and reads the topic's end offsets; one batch then
writes them.  The run is recorded (command ``repair``) with the keys, so ``--resume`` finds them.

``--dry-run`` reads the source rows and the lake rows of the keys and says per key what the repair would
do (insert, update, delete, nothing), taking no lock and writing nothing.

A table recaptured after a failover (``onboard --after-failover``, :mod:`cdc_lake.onboard.recapture`)
also repairs every key whose lake row sorts above the new primary's fork, equal values or not: a change
of the new primary would lose to it.  Its repair ends the recapture; a clean ``validate`` then clears the
possibly-diverged mark.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from cdc_lake.capture.plan import topic_prefix
from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.exceptions import BootstrapError
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.lake.applier import INTERRUPTED_REPAIR, Repair, RepairRows
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN, SOFT_DELETED_COLUMN
from cdc_lake.lake.format import format_facts, load_format
from cdc_lake.lake.target import select_targets
from cdc_lake.sources import engine_for
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import HeldLock
from cdc_lake.state.recaptures import Recapture
from cdc_lake.state.records import RunOutcome
from cdc_lake.state.store import StateStore
from cdc_lake.validation import ValidateResult, json_key
from cdc_lake_bootstrap.handoff import HandoffWait, SnapshotPoint, wait_until_streamed
from cdc_lake_bootstrap.validate import ValidateOptions, source_frame, validate_table

_LOG = logging.getLogger(__name__)

REPAIR_RUN = "repair"
_KINDS = ("missing", "extra", "different", "duplicate")


@dataclass(frozen=True)
class RepairOptions:
    """How ``cdc-lake repair`` chooses its keys and what it does with them."""

    keys_file: Path | None = None
    resume: bool = False
    dry_run: bool = False
    max_keys: int = 10_000
    validate: ValidateOptions = field(default_factory=lambda: ValidateOptions(max_keys=10_000))
    keys: tuple[Mapping[str, Any], ...] = ()
    """The keys themselves as JSON values (continuous validation's confirmed keys), instead of a file."""


@dataclass
class RepairResult:
    """What one table's repair did (or, with ``--dry-run``, would do)."""

    table: str
    keys: int = 0
    source_rows: int = 0
    changes: int = 0
    offsets: int = 0
    commit: str | None = None
    point: str | None = None
    dry_run: bool = False
    actions: list[dict[str, Any]] = field(default_factory=list)
    """With ``--dry-run``: per key, ``action`` (insert, update, delete, none) and the key's values."""
    seconds: float = 0.0
    above_fork: int = 0
    """Keys repaired because their lake row sorts above a recaptured table's fork (among ``keys``)."""

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "table": self.table, "keys": self.keys, "source_rows": self.source_rows, "changes": self.changes,
            "offsets": self.offsets, "commit": self.commit, "point": self.point, "dry_run": self.dry_run,
            "actions": self.actions, "seconds": round(self.seconds, 3), "above_fork": self.above_fork,
        }


def keys_of_validation(results: object) -> dict[str, list[dict[str, Any]]]:
    """The keys per table of a ``validate --json`` output (a list of results): every kind of difference."""
    if not isinstance(results, list) or not all(isinstance(r, dict) and "table" in r for r in results):
        raise BootstrapError("--keys: not a `cdc-lake validate --json` output (a list of table results)")
    found: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        table = str(result["table"])
        keys = found.setdefault(table, [])
        for kind in _KINDS:
            listed = result.get(kind) or []
            count = result.get(f"{kind}_count", len(listed))
            if isinstance(count, int) and count > len(listed):
                raise BootstrapError(
                    f"--keys: the validate output lists {len(listed)} of the {count} {kind} keys of "
                    f"{table} (its --max-keys): run cdc-lake validate with --max-keys of at least the "
                    "count, or repair without --keys (it validates first)"
                )
            keys.extend({k: v for k, v in key.items() if k != "lake_rows"} for key in listed)
    return found


def read_keys_file(path: Path, table: str) -> list[dict[str, Any]]:
    """The keys ``path`` names for ``table``: a ``validate --json`` output, or a JSON list of key objects."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BootstrapError(f"--keys {path}: cannot read it as JSON: {exc}") from exc
    if isinstance(loaded, list) and loaded and all(isinstance(r, dict) and "matches" in r for r in loaded):
        return keys_of_validation(loaded).get(table, [])
    if not isinstance(loaded, list) or not all(isinstance(k, dict) for k in loaded):
        raise BootstrapError(f"--keys {path}: not a validate --json output, nor a JSON list of key objects")
    return loaded


def typed_keys(
    spark: SparkSession, key_type: StructType, keys: Sequence[Mapping[str, Any]], table: str
) -> list[tuple[Any, ...]]:
    """``keys`` (JSON values) cast to the lake's key types, each key once, in their first order."""
    names = key_type.fieldNames()
    texts: list[tuple[str, ...]] = []
    for key in keys:
        absent = [n for n in names if key.get(n) is None]
        if absent:
            raise BootstrapError(f"table {table}: a key to repair lacks {', '.join(absent)}: {key}")
        texts.append(tuple(str(key[n]) for n in names))
    if not texts:
        return []
    text = spark.createDataFrame(texts, StructType([StructField(n, StringType()) for n in names]))
    typed = [
        (F.unhex(F.col(f"`{f.name}`")) if isinstance(f.dataType, BinaryType) else F.col(f"`{f.name}`").cast(
            f.dataType
        )).alias(f"_cdc_typed_{i}")
        for i, f in enumerate(key_type.fields)
    ]
    found: dict[tuple[Any, ...], None] = {}
    for row in text.select("*", *typed).collect():
        value = tuple(row[f"_cdc_typed_{i}"] for i in range(len(names)))
        if any(v is None for v in value):
            shown = dict(zip(names, (row[n] for n in names), strict=True))
            raise BootstrapError(
                f"table {table}: the key {shown} does not fit the lake's key types {key_type.simpleString()}"
            )
        found.setdefault(value, None)
    return list(found)


def repair_table(
    spark: SparkSession,
    config: Config,
    store: StateStore,
    name: str,
    options: RepairOptions,
    repairer: Repair,
) -> RepairResult:
    """Repair ``name``'s differing keys (see the module docstring)."""
    started = time.monotonic()
    config.table(name)  # an unknown table fails here, naming it
    info = store.require_table(name)
    interrupted = info.state is TableState.FAILED and (info.last_error or "").startswith(INTERRUPTED_REPAIR)
    if options.resume and not interrupted:
        raise BootstrapError(f"table {name}: no interrupted repair to resume (it is {info.state.value})")
    if interrupted and not options.resume:
        raise BootstrapError(f"table {name}: {info.last_error}")
    if not interrupted and info.state is not TableState.LIVE:
        raise BootstrapError(
            f"table {name} is {info.state.value}: repair makes keys of a LIVE table exact (`cdc-lake status "
            f"{name}` shows why it is not LIVE, and `cdc-lake rebootstrap {name}` copies it afresh)"
        )
    lake = load_format(spark, config.lake.format)
    base_path = store.current_copy(name).path
    stored = lake.read(base_path)
    key_fields = lake.record_key_fields(base_path)
    if not key_fields:
        raise BootstrapError(f"table {name}: the lake table at {base_path} names no record key fields")
    key_type = StructType([stored.schema[k] for k in key_fields])
    keys = _chosen_keys(spark, config, store, name, options)
    result = RepairResult(name, dry_run=options.dry_run)
    recapture = store.recapture(name)
    if recapture is not None:
        _require_new_capture_applied(store, name, recapture)
        above = keys_above_fork(stored, key_fields, recapture.fork_ordering)
        result.above_fork = len(above)
        keys = list({json.dumps(k, sort_keys=True): k for k in [*keys, *above]}.values())
    if len(keys) > options.max_keys:
        raise BootstrapError(
            f"table {name}: {len(keys)} keys to repair, more than --max-keys {options.max_keys}: raise it, "
            f"or copy the table afresh with cdc-lake rebootstrap {name}"
        )
    values = typed_keys(spark, key_type, keys, name)
    result.keys = len(values)
    if not values:
        result.seconds = time.monotonic() - started
        return result
    if options.dry_run:
        rows = _read_rows(spark, config, name, key_type, values, options, stored)
        result.source_rows = len(rows)
        result.actions = _actions(stored, key_type, values, rows, config.lake.format)
        result.seconds = time.monotonic() - started
        return result
    target = select_targets(config, (name,))[0]

    def read(lock: HeldLock) -> RepairRows:
        rows = _read_rows(spark, config, name, key_type, values, options, stored)
        lock.verify()
        streamed = streamed_point(config, name)
        _LOG.info("%s: repair read %d row(s) of %d key(s) at %s; %s", name, len(rows), len(values),
                  streamed.point, streamed.how)
        result.point, result.source_rows = streamed.point, len(rows)
        return RepairRows(
            tuple(key_fields), tuple(values), tuple(rows), streamed.ends, streamed.point, streamed.read_ms
        )

    detail: dict[str, Any] = {"keys": keys}
    run_id = store.start_run(REPAIR_RUN, name, detail)
    try:
        outcome = repairer.repair(target, read)
    except Exception as exc:
        store.finish_run(run_id, RunOutcome.FAILED, {**detail, "error": f"{type(exc).__name__}: {exc}"})
        raise
    result.seconds = time.monotonic() - started
    result.changes, result.offsets = outcome.changes, outcome.offsets
    result.commit = outcome.commit_instant
    summary = {k: v for k, v in result.to_json().items() if k != "actions"}
    store.finish_run(run_id, RunOutcome.OK, {**detail, **summary})
    if recapture is not None:
        store.finish_recapture(name)
    return result


def keys_above_fork(stored: DataFrame, key_fields: Sequence[str], fork: str) -> list[dict[str, Any]]:
    """The keys (as JSON values) of every lake row, soft-deleted ones too, whose ordering value sorts above
    a recaptured table's ``fork``: rows of transactions the new primary never received, which its own
    changes may sort below, and rows its capture wrote (:mod:`cdc_lake.onboard.recapture`)."""
    above = stored.where(F.col(ORDERING_COLUMN) > F.lit(fork)).select(*[F.col(f"`{k}`") for k in key_fields])
    return [json_key(row.asDict(recursive=True)) for row in above.collect()]


def _require_new_capture_applied(store: StateStore, name: str, recapture: Recapture) -> None:
    """Refuse a recaptured table's repair until the applier reached its new capture's first offsets: the
    repair's batch must not span them (the old primary's re-send marks end there)."""
    applied = store.get_applied_offsets(name)
    behind = {p: (applied.get(p, 0), o) for p, o in recapture.offsets.items() if applied.get(p, 0) < o}
    if behind:
        where = ", ".join(f"partition {p} at {at} of {o}" for p, (at, o) in sorted(behind.items()))
        raise BootstrapError(
            f"table {name}: the applier has not applied the old primary's messages yet ({where}); let "
            f"cdc-lake run apply them, then repair"
        )


@dataclass(frozen=True)
class StreamedPoint:
    """A read point on the source, once Debezium streamed past it: the position, the primary's clock then,
    the table topic's end offsets after, and how the wait ended."""

    point: str
    read_ms: int
    ends: dict[int, int]
    how: str


def streamed_point(config: Config, name: str) -> StreamedPoint:
    """The position the source's rows just read are at (the replica's, the primary's when it is read),
    waited for until Debezium committed past it (the hand-off's wait), and the topic's end offsets then:
    a change before the point is at one of those offsets, one after it at a later one."""
    source, table = config.table(name)
    engine = engine_for(source)
    point = engine.replica_position() if source.replica is not None else engine.current_position()
    read_ms = engine.primary_clock_ms()
    wait = HandoffWait.of(engine, topic_prefix(source), config.bootstrap.handoff_timeout_seconds)
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        how = wait_until_streamed(name, table.name, SnapshotPoint(point, read_ms), wait, connect)
    topic = select_targets(config, (name,))[0].topic
    ends = end_offsets(config.kafka.bootstrap_servers, topic, extra=dict(config.kafka.consumer))
    return StreamedPoint(point, read_ms, ends, how)


def _chosen_keys(
    spark: SparkSession, config: Config, store: StateStore, name: str, options: RepairOptions
) -> list[dict[str, Any]]:
    """The keys to repair as JSON values: ``--resume``'s, ``--keys``', or a validation's."""
    if options.resume:
        for run in store.list_runs(name):
            if run.command == REPAIR_RUN:
                return list(run.detail.get("keys") or [])
        raise BootstrapError(f"table {name}: no repair run recorded to resume")
    if options.keys:
        return [dict(k) for k in options.keys]
    if options.keys_file is not None:
        return read_keys_file(options.keys_file, name)
    found: ValidateResult = validate_table(spark, config, store, name, options.validate)
    _LOG.info(
        "%s: validated: %d missing, %d extra, %d different, %d duplicate key(s)", name, found.missing_count,
        found.extra_count, found.different_count, found.duplicate_count,
    )
    counts = (found.missing_count, found.extra_count, found.different_count, found.duplicate_count)
    if sum(counts) > options.validate.max_keys:
        raise BootstrapError(
            f"table {name}: {sum(counts)} keys differ, more than --max-keys {options.validate.max_keys}: "
            f"raise it, or copy the table afresh with cdc-lake rebootstrap {name}"
        )
    return keys_of_validation([found.to_json()]).get(name, [])


def _read_rows(
    spark: SparkSession,
    config: Config,
    name: str,
    key_type: StructType,
    values: Sequence[tuple[Any, ...]],
    options: RepairOptions,
    stored: DataFrame,
) -> list[dict[str, Any]]:
    """The source rows of the keys ``values``, in the lake's columns and types (a column the source no
    longer has is left out: the batch leaves it null), after the replica passed the primary's position."""
    frame, _, names, _, _ = source_frame(spark, config, name, options.validate, values)
    lake_types = {f.name: f.dataType for f in stored.schema.fields}
    frame = frame.select(*[F.col(f"`{n}`").cast(lake_types[n]).alias(n) for n in names if n in lake_types])
    rows = rows_of_keys(frame, key_type, values, config.lake.format).collect()
    return [row.asDict(recursive=True) for row in rows]


def rows_of_keys(
    frame: DataFrame, key_type: StructType, values: Sequence[tuple[Any, ...]], lake_format: str
) -> DataFrame:
    """The rows of ``frame`` whose key (the fields of ``key_type``) is one of ``values``, matched by the
    lake format's key identity (:meth:`~cdc_lake.lake.format.FormatFacts.key_identity_column`: as its
    record key tells keys apart, not by Spark's equality, which takes ``-0.0`` for ``0.0``)."""
    facts = format_facts(lake_format)
    wanted = frame.sparkSession.createDataFrame(list(values), key_type)
    own = facts.key_identity_column(F.struct(*[F.col(f"`{k}`") for k in key_type.fieldNames()]), key_type)
    keys = wanted.select(own.alias("_cdc_wanted_key"))
    return frame.join(keys, own == F.col("_cdc_wanted_key"), "left_semi")


def _same(lake: Any, source: Any) -> bool:
    """Equal values, a NaN equal to a NaN (Python's ``==`` says a NaN differs from itself)."""
    if isinstance(lake, float) and isinstance(source, float) and math.isnan(lake) and math.isnan(source):
        return True
    return bool(lake == source)


def _actions(
    stored: DataFrame,
    key_type: StructType,
    values: Sequence[tuple[Any, ...]],
    rows: Sequence[Mapping[str, Any]],
    lake_format: str,
) -> list[dict[str, Any]]:
    """Per key, what a repair would do now: insert (the lake lacks it), delete (the source does), update
    (the values differ) or none."""
    names = key_type.fieldNames()
    facts = format_facts(lake_format)
    identity = facts.key_identity
    for flag in (DELETED_COLUMN, SOFT_DELETED_COLUMN):
        if flag in stored.columns:
            stored = stored.where(~F.coalesce(F.col(flag), F.lit(False)))
    wanted = {identity(v): v for v in values}
    held: dict[Any, dict[str, Any]] = {}
    for row in rows_of_keys(stored, key_type, values, lake_format).collect():
        found = row.asDict(recursive=True)
        held[identity(tuple(found[n] for n in names))] = found
    read = {identity(tuple(r[n] for n in names)): r for r in rows}
    actions = []
    for ident, value in wanted.items():
        source_row, lake_row = read.get(ident), held.get(ident)
        action: str
        if source_row is None:
            action = "delete" if lake_row is not None else "none"
        elif lake_row is None:
            action = "insert"
        else:
            same = all(_same(lake_row.get(c), v) for c, v in source_row.items())
            action = "none" if same else "update"
        actions.append({"action": action, **json_key(dict(zip(names, value, strict=True)))})
    return actions

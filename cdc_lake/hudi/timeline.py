"""Reading a Hudi table's timeline and properties through Hudi's own Java API (``HoodieTableMetaClient``).

Hudi 1.x stores the timeline under ``.hoodie/timeline`` with completion times in
the file names and Avro-encoded commit metadata; the meta client reads that (and
older layouts) for any Hadoop filesystem the session is configured for, local
or ``s3a://``.  Only completed instants are considered: an inflight commit is
invisible to readers and rolled back by the next write.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from pyspark.sql import SparkSession

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.options import COMMIT_METADATA_PREFIX
from cdc_lake.lake.commit_metadata import written_by_cdc_lake
from cdc_lake.lake.format import CommitInfo, Partition
from cdc_lake.spark.errors import JVM_ERRORS, root_cause

# Operations that rewrite files without new data; their commits carry no cdc-lake metadata.
_TABLE_SERVICE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})


def _properties_path(spark: SparkSession, base_path: str) -> tuple[Any, Any]:
    """The Hadoop path of the table's ``.hoodie/hoodie.properties`` and its file system."""
    jvm: Any = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{base_path.rstrip('/')}/.hoodie/hoodie.properties")
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def table_exists(spark: SparkSession, base_path: str) -> bool:
    """Whether ``base_path`` holds a Hudi table (its ``.hoodie/hoodie.properties`` exists)."""
    path, fs = _properties_path(spark, base_path)
    return bool(fs.exists(path))


def record_key_fields(spark: SparkSession, base_path: str) -> tuple[str, ...] | None:
    """The record key fields in the table's ``hoodie.properties`` (None if it names none)."""
    jvm: Any = spark._jvm
    path, fs = _properties_path(spark, base_path)
    stream = fs.open(path)
    try:
        properties = jvm.java.util.Properties()
        properties.load(stream)
    finally:
        stream.close()
    fields = properties.getProperty("hoodie.table.recordkey.fields")
    return tuple(str(fields).split(",")) if fields else None


def meta_client(spark: SparkSession, base_path: str) -> Any:
    """Hudi's ``HoodieTableMetaClient`` of the table at ``base_path``, its active timeline loaded."""
    jvm: Any = spark._jvm
    storage_conf = jvm.org.apache.hudi.storage.hadoop.HadoopStorageConfiguration(
        spark._jsc.hadoopConfiguration()
    )
    return (
        jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder()
        .setConf(storage_conf)
        .setBasePath(base_path)
        .setLoadActiveTimelineOnLoad(True)
        .build()
    )


def _commit_info(timeline: Any, instant: Any) -> CommitInfo:
    commit = timeline.readCommitMetadata(instant)
    extra = commit.getExtraMetadata()
    metadata = {
        str(key)[len(COMMIT_METADATA_PREFIX) :]: str(value)
        for key, value in dict(extra).items()
        if str(key).startswith(COMMIT_METADATA_PREFIX) and value is not None
    }
    completion = instant.getCompletionTime()
    return CommitInfo(
        instant=str(instant.requestedTime()),
        action=str(instant.getAction()),
        completion_time=str(completion) if completion is not None else None,
        operation=str(commit.getOperationType().name()),
        metadata=metadata,
    )


def _latest_data_commit(spark: SparkSession, base_path: str, ours: bool = False) -> CommitInfo | None:
    if not table_exists(spark, base_path):
        return None
    timeline = (
        meta_client(spark, base_path).getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    )
    for instant in reversed(list(timeline.getInstants())):
        info = _commit_info(timeline, instant)
        mine = not ours or written_by_cdc_lake(info.metadata)
        if info.operation not in _TABLE_SERVICE_OPERATIONS and mine:
            return info
    return None


def latest_commit(spark: SparkSession, base_path: str, *, ours: bool = False) -> CommitInfo | None:
    """The latest completed data commit of the table at ``base_path``, or None if there is none.

    Table-service commits (compaction, clustering) are skipped, so the answer is
    the last commit a writer made, carrying the metadata it stored; with ``ours``, the last one
    cdc-lake made (another writer's commits skipped too).  Raises LakeWriteError when the timeline
    cannot be read.
    """
    try:
        return _latest_data_commit(spark, base_path, ours)
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"reading the Hudi timeline at {base_path} failed: {root_cause(exc)}") from exc


def records_written(spark: SparkSession, base_path: str, instant: str) -> int:
    """How many records the completed commit ``instant`` wrote (from its write statistics)."""
    try:
        timeline = (
            meta_client(spark, base_path).getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
        )
        for hoodie_instant in timeline.getInstants():
            if str(hoodie_instant.requestedTime()) == instant:
                return int(timeline.readCommitMetadata(hoodie_instant).fetchTotalRecordsWritten())
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"reading commit {instant} at {base_path} failed: {root_cause(exc)}") from exc
    raise LakeWriteError(f"commit {instant} at {base_path} is not a completed commit")


def partition_of(path: str) -> Partition:
    """A partition of the Hive-style, escaped folder ``path`` (``region=eu/day=2024-01-01``: cdc-lake's
    tables are written with ``hive_style_partitioning`` and ``partitionpath.urlencode``; a null value's
    folder is Hive's own, :data:`~cdc_lake.lake.format.NULL_PARTITION_VALUE`)."""
    parts = path.split("/")
    return Partition(path, tuple(unquote(p.split("=", 1)[1] if "=" in p else p) for p in parts))


def partitions(spark: SparkSession, base_path: str) -> tuple[Partition, ...]:
    """Every partition of the table at ``base_path`` (from its metadata table when it has one, else by
    listing), in path order; none for an unpartitioned table."""
    jvm: Any = spark._jvm
    try:
        client = meta_client(spark, base_path)
        if not client.getTableConfig().isTablePartitioned():
            return ()
        context = jvm.org.apache.hudi.common.engine.HoodieLocalEngineContext(client.getStorageConf())
        from_metadata = bool(client.getTableConfig().isMetadataTableAvailable())
        paths = jvm.org.apache.hudi.common.fs.FSUtils.getAllPartitionPaths(context, client, from_metadata)
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"listing the partitions at {base_path} failed: {root_cause(exc)}") from exc
    return tuple(partition_of(str(path)) for path in sorted(str(p) for p in paths) if path)

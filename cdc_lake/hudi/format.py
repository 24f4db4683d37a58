"""Hudi as a lake format: :class:`HudiFormat`, the :class:`~cdc_lake.lake.format.LakeFormat` writers use.

A lake :class:`~cdc_lake.lake.layout.TableSpec` becomes a :class:`~cdc_lake.hudi.options.HudiTableSpec`
here (:func:`hudi_spec`: the spec's key, partitioning and layout, ordered by the source position column
``_cdc_ordering``), and the commit metadata the writer options Hudi stores in the commit.
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import DataFrame

from cdc_lake.hudi import keys, services, timeline, writer
from cdc_lake.hudi.options import IN_PROCESS_LOCK_PROVIDER, LOCK_PROVIDER_OPTION, HudiTableSpec
from cdc_lake.lake.columns import ORDERING_COLUMN
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import (
    UNREAD,
    CommitInfo,
    LakeFormat,
    Partition,
    PlanNow,
    ServiceBacklog,
    Unread,
    WriteOperation,
)
from cdc_lake.lake.layout import IndexType, TableSpec, TableType


def hudi_spec(spec: TableSpec) -> HudiTableSpec:
    """The Hudi table spec of the lake table ``spec``, ordered by ``_cdc_ordering``."""
    hudi = HudiTableSpec(
        table_name=spec.name,
        base_path=spec.base_path,
        record_key_fields=spec.key_fields,
        ordering_field=ORDERING_COLUMN,
        partition_fields=spec.partition_fields,
        table_type=spec.table_type,
        index=spec.index,
        compaction=spec.compaction,
        table_version=spec.table_version,
        bucket_count=spec.buckets,
        extra_options=spec.options,
    )
    return hudi if spec.parallelism is None else dataclasses.replace(hudi, parallelism=spec.parallelism)


class HudiFormat(LakeFormat):
    """Hudi tables through Hudi's Spark datasource and Java API (``cdc_lake.hudi.writer``, ``.timeline``)."""

    def table_exists(self, base_path: str) -> bool:
        return timeline.table_exists(self.spark, base_path)

    def read(self, base_path: str, *, meta_columns: bool = False) -> DataFrame:
        return writer.read_table(self.spark, base_path, meta_columns=meta_columns)

    def write(
        self,
        spec: TableSpec,
        rows: DataFrame,
        operation: WriteOperation,
        metadata: CommitMetadata,
        *,
        previous: str | Unread | None = UNREAD,
        unique_keys: bool = False,
    ) -> str:
        metadata_options = dataclasses.replace(metadata, layout=spec.layout).to_dict()
        return writer.write_batch(
            self.spark,
            hudi_spec(spec),
            rows,
            operation,
            metadata_options,
            previous=previous,
            unique_keys=unique_keys,
        )

    def latest_commit(self, base_path: str, *, ours: bool = False) -> CommitInfo | None:
        return timeline.latest_commit(self.spark, base_path, ours=ours)

    def records_written(self, base_path: str, instant: str) -> int:
        return timeline.records_written(self.spark, base_path, instant)

    def record_key_fields(self, base_path: str) -> tuple[str, ...] | None:
        return timeline.record_key_fields(self.spark, base_path)

    def partitions(self, base_path: str) -> tuple[Partition, ...]:
        return timeline.partitions(self.spark, base_path)

    def key_refusal(self, table: str, stored: DataFrame, key_fields: tuple[str, ...]) -> str | None:
        foreign = keys.row_writer_record_key(stored, key_fields)
        return None if foreign is None else keys.row_writer_key_reason(table, foreign)

    def snapshot_in_one_commit(self, spec: TableSpec) -> bool:
        # The bucket index keeps one file group per bucket: the first bulk insert creates them all, and
        # a later group's rows go into their log files (cdc_lake.hudi.writer.write_batch).
        return spec.index is IndexType.BUCKET

    def services_outside_write(self, spec: TableSpec) -> bool:
        return spec.table_type is TableType.MERGE_ON_READ and not spec.compaction.inline

    def services_lock_shared(self, spec: TableSpec) -> bool:
        provider = dict(spec.options).get(LOCK_PROVIDER_OPTION)
        return provider is not None and provider != IN_PROCESS_LOCK_PROVIDER

    def run_services(self, spec: TableSpec, *, plan: PlanNow = PlanNow.NOTHING) -> tuple[str, ...]:
        return services.execute_compactions(self.spark, hudi_spec(spec), plan=plan)

    def service_backlog(self, base_path: str) -> ServiceBacklog:
        return services.service_backlog(self.spark, base_path)

    def remove(self, base_path: str) -> None:
        writer.remove_table(self.spark, base_path)

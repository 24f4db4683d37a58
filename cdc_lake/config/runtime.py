"""What the stages run with: the state store, the Spark session, the applier's batches and tier intervals,
the bootstrap snapshot, continuous validation, and the monitoring thresholds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Final

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from cdc_lake.config.paths import DEFAULT_STATE_DIR
from cdc_lake.exceptions import ConfigError
from cdc_lake.sources.settings import ConfigModel as _Model
from cdc_lake.sources.settings import PassthroughValue


class StateStoreSettings(_Model):
    """The SQLAlchemy database holding lifecycle state, watermarks and applied offsets."""

    url: str = f"sqlite:///{DEFAULT_STATE_DIR}/state.db"

    @field_validator("url")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            make_url(value)
        except ArgumentError:
            # The URL may hold a password: never echo it.
            raise PydanticCustomError("state_store_url", "not a SQLAlchemy database URL") from None
        return value


SPARK_MASTER_URL: Final = re.compile(
    r"yarn|local(\[(\*|\d+)(,\d+)?\])?|k8s://(https?://)?[^\s/:]+(:\d+)?/?"
    r"|spark://[^\s/:,]+:\d+(,[^\s/:,]+:\d+)*|mesos://\S+"
)
"""The master URLs Spark 3.5 accepts: YARN, Kubernetes (an API server), standalone (with standby
masters), Mesos, or in-process."""


class SparkSettings(_Model):
    """The Spark session; an empty ``jars`` list means resolve the lake format's jars (and the rest) through
    Maven."""

    master: str = "local[2]"
    app_name: str = "cdc-lake"
    driver_memory: str = "1g"
    jars: list[str] = Field(default_factory=list)
    conf: dict[str, PassthroughValue] = Field(default_factory=dict)
    class_data_sharing: bool = True
    """Map the classes of earlier driver JVMs from an archive (:mod:`cdc_lake.spark.class_sharing`)."""

    @field_validator("master")
    @classmethod
    def _is_a_master_url(cls, value: str) -> str:
        if not SPARK_MASTER_URL.fullmatch(value):
            raise PydanticCustomError(
                "spark_master",
                "'{value}' is not a Spark master URL; use yarn, k8s://https://HOST:PORT, "
                "spark://HOST:PORT or local[N] (docs/deploy.md)",
                {"value": value},
            )
        return value


def _default_intervals() -> dict[int, int]:
    return {0: 0, 1: 900, 2: 3600}


class ApplySettings(_Model):
    """The incremental applier: batch size and how often each tier runs."""

    batch_max_events: int = Field(default=500_000, ge=1)
    default_interval_seconds: dict[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]] = Field(
        default_factory=_default_intervals
    )
    dead_letter_topic: str | None = None

    @field_validator("default_interval_seconds", mode="before")
    @classmethod
    def _over_defaults(cls, value: object) -> object:
        """Tiers the user does not mention keep their default interval."""
        if isinstance(value, Mapping):
            return {**_default_intervals(), **value}
        return value

    def interval_for(self, tier: int) -> int:
        """Seconds between apply runs for ``tier``: its own setting, else the nearest lower tier's."""
        lower = [t for t in self.default_interval_seconds if t <= tier]
        if not lower:
            raise ConfigError(f"apply.default_interval_seconds: no interval for tier {tier} or below")
        return self.default_interval_seconds[max(lower)]


class BootstrapSettings(_Model):
    """The snapshot from the read replica and its hand-off to the applier."""

    replica_delay_seconds: int = Field(default=60, ge=0)
    replica_wait_timeout_seconds: int = Field(default=1800, ge=1)
    handoff_timeout_seconds: int = Field(default=1800, ge=1)
    allow_primary_reads: bool = False
    fetch_size: int = Field(default=10_000, ge=1)
    max_partitions: int = Field(default=64, ge=1)


class ValidationSettings(_Model):
    """Continuous validation inside ``cdc-lake run`` (:mod:`cdc_lake_bootstrap.continuous`).

    Every ``sample_seconds`` the next key ranges of the next tables are compared with the read replica,
    so that a cycle covers every LIVE table ``run`` applies in ``cycle_hours``; a difference that a second
    look confirms marks the table possibly diverged and, with ``auto_repair``, is repaired.  A sample that
    finds more than ``max_keys`` keys differing repairs nothing (``cdc-lake rebootstrap`` copies the
    table afresh).
    """

    continuous: bool = True
    sample_seconds: float = Field(default=300.0, gt=0)
    cycle_hours: float = Field(default=24.0, gt=0)
    auto_repair: bool = False
    max_keys: int = Field(default=1000, ge=1)


class TierThresholds(_Model):
    """Alert thresholds for the tables (and their connectors' slots) of one tier."""

    freshness_max_seconds: int = Field(ge=1)
    kafka_lag_max_messages: int = Field(default=1_000_000, ge=0)
    wal_retained_max_bytes: int = Field(default=10 * 1024**3, ge=0)


def _default_tiers() -> dict[int, TierThresholds]:
    return {
        0: TierThresholds(
            freshness_max_seconds=300, kafka_lag_max_messages=100_000, wal_retained_max_bytes=2 * 1024**3
        ),
        1: TierThresholds(freshness_max_seconds=3600),
        2: TierThresholds(freshness_max_seconds=4 * 3600),
    }


RUNBOOK_BASE_URL: Final = re.compile(r"^https?://\S+$")
"""What ``monitoring.runbook_base_url`` (and ``alerts render --runbook-base-url``) must look like."""


class MonitoringSettings(_Model):
    """``cdc-lake lag`` thresholds, the metrics endpoint and the generated Prometheus alert rules.

    ``tiers`` maps a tier to its thresholds; a tier not listed uses the nearest lower tier's.
    """

    metrics_port: int = Field(default=9464, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"
    refresh_seconds: int = Field(default=30, ge=1)
    replica_lag_max_seconds: int = Field(default=600, ge=0)
    replica_lag_max_bytes: int = Field(default=1024**3, ge=0)
    binlog_min_files_ahead: int = Field(default=1, ge=0)
    applier_silent_max_seconds: int = Field(default=300, ge=1)
    debezium_behind_max_seconds: int = Field(default=120, ge=1)
    """CdcLakeDebeziumStreamingBehind: a streaming connector reads changes this much after their commit
    (Debezium's MilliSecondsBehindSource, from the Connect workers' JMX exporter)."""
    alert_for_seconds: int = Field(default=300, ge=0)
    runbook_base_url: str | None = Field(default=None, pattern=RUNBOOK_BASE_URL.pattern)
    """Where docs/runbooks is published (http/https): the rules' ``runbook_url`` is ``<this>/<page>.md``.
    No default (the project has no canonical address): ``cdc-lake alerts render`` requires it."""
    tiers: dict[Annotated[int, Field(ge=0)], TierThresholds] = Field(default_factory=_default_tiers)

    @field_validator("tiers", mode="before")
    @classmethod
    def _over_default_tiers(cls, value: object) -> object:
        """Tiers the user does not mention keep their default thresholds."""
        if isinstance(value, Mapping):
            return {**_default_tiers(), **value}
        return value

    def thresholds_for(self, tier: int) -> TierThresholds:
        """The thresholds of ``tier``: its own, else the nearest lower tier's."""
        lower = [t for t in self.tiers if t <= tier]
        if not lower:
            raise ConfigError(f"monitoring.tiers: no thresholds for tier {tier} or below")
        return self.tiers[max(lower)]

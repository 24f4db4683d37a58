"""Every error cdc-lake raises on purpose, in one flat module.

Each class says when it is raised.  The CLI turns any :class:`CdcLakeError`
into a one-line message and a non-zero exit; anything else is a bug.
Messages name the table, field, setting or service at fault and never contain
a secret.
"""

from __future__ import annotations


class CdcLakeError(Exception):
    """Base class: an expected failure with a message fit for an operator."""

    exit_code: int = 1


class ConfigError(CdcLakeError):
    """Raised when the YAML config is missing, malformed, has an unknown key, or names an unset ${VAR}."""

    exit_code = 2


class StateStoreError(CdcLakeError):
    """Raised when the state store cannot be opened, migrated, or holds an impossible transition."""


class UnknownSourceError(CdcLakeError):
    """Raised when a command names a source that is not in the config."""


class UnknownTableError(CdcLakeError):
    """Raised when a command names a table (``source.schema.table``) that is not in the config."""


class JvmArtifactError(CdcLakeError):
    """Raised when Maven cannot resolve a jar or archive the product needs."""


class NotInstalledError(CdcLakeError):
    """Raised when a feature needs an optional dependency that is not installed; names the extra to install
    (:mod:`cdc_lake.extras`)."""


class StackError(CdcLakeError):
    """Raised when a local stack service cannot be installed, started, stopped or reached."""


class DecodeError(CdcLakeError):
    """Raised when a Kafka message cannot be decoded; names topic, partition, offset and reason."""


class SchemaRegistryError(CdcLakeError):
    """Raised when the schema registry is unreachable or does not know a schema id."""


class KafkaReadError(CdcLakeError):
    """Raised when a topic's offsets or messages cannot be read; names the topic and partition."""


class ConnectError(CdcLakeError):
    """Raised when Kafka Connect rejects a request, is unreachable, or a connector task FAILED."""


class LakeWriteError(CdcLakeError):
    """Raised when a lake table write or read fails; names the table and base path."""


class SourceEngineError(CdcLakeError):
    """Raised when a source database query fails, or a source or change event names an unknown engine."""


class PreflightError(CdcLakeError):
    """Raised when onboarding preflight checks fail; names each failed check and what it found."""


class OnboardError(CdcLakeError):
    """Raised when onboard or offboard stops part-way; says what was rolled back or left and how to resume."""


class SchemaChangeError(CdcLakeError):
    """Raised when a writer schema changes a lake table's columns in a way the applier cannot evolve."""


class ApplyError(CdcLakeError):
    """Raised by ``cdc-lake apply --once`` when tables failed; names each one and its cause.

    A table stopped by a bad message names its topic, partition, offset and reason.
    """


class BootstrapError(CdcLakeError):
    """Raised when a bootstrap cannot start or stops part-way.

    A table without a usable key or with a column type it cannot map, a replica that is not one or
    does not catch up, a lake path already in use, a failed read or Hudi write.  The message names the
    table; what was written stays recorded, so running the bootstrap again resumes it.
    """


class BootstrapBusyError(CdcLakeError):
    """Raised when a second bootstrap starts on a table whose bootstrap is still running elsewhere."""


class HealthCheckError(CdcLakeError):
    """Raised by ``lag`` when a monitoring threshold is breached, by ``status`` when a table is FAILED,
    and by ``validate`` when the lake differs from the source (exit code 4: the check ran, the answer is no).
    """

    exit_code = 4


class SchemaChangedTablesError(HealthCheckError):
    """Raised by ``status`` when a table stopped in SCHEMA_CHANGED and none is FAILED (exit code 5)."""

    exit_code = 5


class DivergedTablesError(HealthCheckError):
    """Raised by ``status`` when a table is marked possibly diverged and none is FAILED or
    SCHEMA_CHANGED (exit code 6)."""

    exit_code = 6


class QuarantineError(CdcLakeError):
    """Raised when ``cdc-lake quarantine`` cannot copy or record a message; names the table and offset."""


class RebootstrapError(CdcLakeError):
    """Raised when a re-bootstrap cannot start, resume, switch or clean up; names the table and step."""


class CatalogError(CdcLakeError):
    """Raised when a catalog (AWS Glue) rejects or cannot take a table's registration; names the table."""

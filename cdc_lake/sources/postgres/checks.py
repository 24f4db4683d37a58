"""Postgres preflight: the facts read from the primary and replica, and the checks judged from them.

:class:`PostgresFacts` is plain data, so every check can be tested against recorded query
results, including the settings a shared server cannot change (``wal_level``,
``max_replication_slots``, ``max_slot_wal_keep_size``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdc_lake.sources.base import Capture, PreflightOptions, captured_keys
from cdc_lake.sources.checks import (
    CheckResult,
    check_primary_keys,
    check_replica_configured,
    check_source_tls,
    name_list,
)
from cdc_lake.sources.postgres.rewrites import REWRITE_LOG
from cdc_lake.sources.postgres.settings import PostgresConnection
from cdc_lake.sources.settings import Connection, Source, engine_model

PLUGIN = "pgoutput"

# relkind values: only ordinary tables are published as themselves.
_ORDINARY_TABLE = "r"
_PARTITIONED_TABLE = "p"
_IDENTITY = {"d": "DEFAULT", "n": "NOTHING", "f": "FULL", "i": "INDEX"}

_KEYLESS_FIX = "add a primary key, or set tables[].key in the config and use --replica-identity-full"

# What each sslmode short of verify-ca/verify-full leaves open (None: unset, libpq's and pgJDBC's prefer).
_UNVERIFIED_SSLMODES: Mapping[str | None, str] = {
    None: "unset (prefer: TLS only if the server offers it, its certificate not verified)",
    "disable": "disable (plaintext)",
    "allow": "allow (plaintext unless the server requires TLS, its certificate not verified)",
    "prefer": "prefer (TLS only if the server offers it, its certificate not verified)",
    "require": "require (encrypted, but the server's certificate is not verified)",
}


@dataclass(frozen=True)
class PgTableFacts:
    """One table on the primary; ``kind`` is None when it does not exist.

    ``toastable`` lists columns whose storage is not PLAIN (their values may be TOASTed);
    ``owned`` says whether the current user may ALTER the table (owner, member, superuser);
    ``identity_index`` lists the columns of the index named by REPLICA IDENTITY USING INDEX;
    ``unique_keys`` the key columns of each unique index that keeps its rows unique (valid, not partial,
    no expression, every key column NOT NULL; the primary key's too);
    ``toastable_arrays`` pairs each array column whose storage is not PLAIN with its element type name;
    ``unlogged``: an UNLOGGED table, whose changes never reach the WAL (nothing to decode).
    """

    name: str
    kind: str | None = None
    unlogged: bool = False
    columns: tuple[str, ...] = ()
    primary_key: tuple[str, ...] = ()
    replica_identity: str = "d"
    identity_index: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()
    toastable: tuple[str, ...] = ()
    toastable_arrays: tuple[tuple[str, str], ...] = ()
    can_select: bool = False
    owned: bool = False

    @property
    def exists(self) -> bool:
        """Whether the table was found on the primary (it has a relation kind)."""
        return self.kind is not None


@dataclass(frozen=True)
class PgSlotFacts:
    """A replication slot that already exists under a planned name."""

    name: str
    slot_type: str
    plugin: str | None
    database: str | None
    active: bool


@dataclass(frozen=True)
class PgPublicationFacts:
    """A publication that already exists under a planned name."""

    name: str
    all_tables: bool
    publishes: tuple[str, ...]
    tables: frozenset[str]
    owned: bool


@dataclass(frozen=True)
class PgHeartbeatFacts:
    """The heartbeat table and whether the user may create or write it."""

    name: str
    exists: bool
    can_write: bool
    schema_exists: bool
    can_create_in_schema: bool


@dataclass(frozen=True)
class PgRewriteLogFacts:
    """The table-rewrite log (:mod:`cdc_lake.sources.postgres.rewrites`): the table, its event trigger
    (enabled), and whether the user may read the log."""

    table_exists: bool
    trigger_enabled: bool
    can_read: bool

    @property
    def installed(self) -> bool:
        """Whether rewrites are logged and the user can read them."""
        return self.table_exists and self.trigger_enabled and self.can_read


@dataclass(frozen=True)
class PgReplicaFacts:
    """The read replica as seen by the configured user; ``error`` is set when it was unreachable."""

    configured: bool
    address: str = ""
    error: str | None = None
    in_recovery: bool = False
    receive_lsn: str | None = None
    replay_lsn: str | None = None
    replay_paused: bool = False
    lag_bytes: int | None = None


@dataclass(frozen=True)
class PostgresFacts:
    """Everything the Postgres checks judge, read in one pass over the primary and replica."""

    database: str
    user: str
    settings: Mapping[str, str]
    slots_used: int
    wal_senders_used: int
    superuser: bool
    replication_role: bool
    can_create_in_database: bool
    heartbeat: PgHeartbeatFacts
    rewrite_log: PgRewriteLogFacts
    tables: Mapping[str, PgTableFacts]
    replica: PgReplicaFacts
    slots: Mapping[str, PgSlotFacts] = field(default_factory=dict)
    publications: Mapping[str, PgPublicationFacts] = field(default_factory=dict)


class IdentityGap(enum.Enum):
    """What a table's replica identity leaves out of the old row of an update or delete.

    ``NO_KEY``: no old key at all (NOTHING, or DEFAULT without a primary key).  ``OTHER_KEY``: the
    configured ``key`` is not the identity's columns (DEFAULT names the primary key, USING INDEX its
    index), so pgoutput sends no old key when the configured key changes (the row under the old key
    would stay in the lake) and a delete's before image lacks the configured key.  ``TOAST``: DEFAULT
    with TOASTable columns, whose unchanged values arrive as placeholders.
    """

    NO_KEY = "no key"
    OTHER_KEY = "other key"
    TOAST = "toast"


def identity_gap(table: PgTableFacts, key: Sequence[str]) -> IdentityGap | None:
    """What ``table``'s replica identity misses for the configured ``key`` (empty: the primary key)."""
    identity = table.replica_identity
    if identity == "n" or (identity == "d" and not table.primary_key):
        return IdentityGap.NO_KEY
    if key and identity in ("d", "i"):
        covered = table.primary_key if identity == "d" else table.identity_index
        if set(key) != set(covered):
            return IdentityGap.OTHER_KEY
    if identity == "d" and table.toastable:
        return IdentityGap.TOAST
    return None


def _identity_columns(table: PgTableFacts) -> str:
    if table.replica_identity == "i":
        return f"USING INDEX on {', '.join(table.identity_index) or 'no columns'}"
    return f"DEFAULT = primary key {', '.join(table.primary_key)}"


def evaluate(
    facts: PostgresFacts, captures: Sequence[Capture], options: PreflightOptions
) -> list[CheckResult]:
    """Every Postgres check for ``captures``, in the order they are reported."""
    keys = captured_keys(captures)
    return [
        check_wal_level(facts),
        check_replication_slots(facts, captures),
        check_wal_senders(facts, captures, options),
        check_wal_keep_size(facts),
        check_replication_privilege(facts),
        check_tables(facts, keys),
        check_select(facts, keys),
        check_primary_keys(facts.tables, keys, _KEYLESS_FIX),
        check_replica_identity(facts, keys, options.replica_identity_full),
        check_toasted_arrays(facts, captures, options.replica_identity_full),
        check_publications(facts, captures),
        check_heartbeat(facts),
        check_rewrite_log(facts),
        check_slots(facts, captures, options),
        check_replica(facts.replica, options.replica_required),
    ]


def check_tls(source: Source) -> CheckResult:
    """Every connection verifies the server's certificate (sslmode verify-ca, verify-full), else a warning."""

    def unverified(connection: Connection) -> str | None:
        problem = _UNVERIFIED_SSLMODES.get(engine_model(connection, PostgresConnection).sslmode)
        return None if problem is None else f"sslmode {problem}"

    return check_source_tls(source, unverified, "sslmode: verify-full and sslrootcert (the servers' CA file)")


def check_wal_level(facts: PostgresFacts) -> CheckResult:
    """``wal_level`` must be ``logical`` for logical decoding."""
    level = facts.settings.get("wal_level", "")
    if level == "logical":
        return CheckResult.ok("wal_level", "logical")
    return CheckResult.fail(
        "wal_level",
        f"is {level or 'unknown'}, logical decoding needs logical",
        "ALTER SYSTEM SET wal_level = logical; then restart Postgres",
    )


def _new_slots(facts: PostgresFacts, captures: Sequence[Capture]) -> list[str]:
    return [c.ids.slot for c in captures if c.ids.slot is not None and c.ids.slot not in facts.slots]


def check_replication_slots(facts: PostgresFacts, captures: Sequence[Capture]) -> CheckResult:
    """``max_replication_slots`` leaves room for the slots the new connectors will create."""
    limit = int(facts.settings.get("max_replication_slots", "0"))
    free = limit - facts.slots_used
    needed = len(_new_slots(facts, captures))
    detail = f"{facts.slots_used} of {limit} used, {needed} needed"
    if needed > free:
        return CheckResult.fail(
            "replication slots",
            detail,
            f"raise max_replication_slots to at least {facts.slots_used + needed} (restart), "
            "or drop unused slots",
        )
    return CheckResult.ok("replication slots", detail)


def check_wal_senders(
    facts: PostgresFacts, captures: Sequence[Capture], options: PreflightOptions
) -> CheckResult:
    """``max_wal_senders`` leaves room for one walsender per connector not yet streaming."""
    limit = int(facts.settings.get("max_wal_senders", "0"))
    free = limit - facts.wal_senders_used
    needed = sum(
        1
        for capture in captures
        if not (capture.connector in options.registered and _slot_active(facts, capture.ids.slot))
    )
    detail = f"{facts.wal_senders_used} of {limit} used, {needed} needed"
    if needed > free:
        return CheckResult.fail(
            "wal senders",
            detail,
            f"raise max_wal_senders to at least {facts.wal_senders_used + needed} (restart)",
        )
    return CheckResult.ok("wal senders", detail)


def _slot_active(facts: PostgresFacts, slot_name: str | None) -> bool:
    slot = facts.slots.get(slot_name or "")
    return slot is not None and slot.active


def check_wal_keep_size(facts: PostgresFacts) -> CheckResult:
    """``max_slot_wal_keep_size`` bounds the WAL a stuck slot can hold on the primary's disk."""
    value = facts.settings.get("max_slot_wal_keep_size", "-1")
    if value in ("-1", ""):
        return CheckResult.fail(
            "max_slot_wal_keep_size",
            "is -1: a stopped connector's slot can fill the primary's disk with WAL",
            "ALTER SYSTEM SET max_slot_wal_keep_size = '50GB' (size it above the longest outage's WAL); "
            "SELECT pg_reload_conf()",
        )
    return CheckResult.ok("max_slot_wal_keep_size", f"{value} MB")


def check_replication_privilege(facts: PostgresFacts) -> CheckResult:
    """The connector user may open a replication connection."""
    if facts.superuser:
        return CheckResult.ok("replication privilege", f"{facts.user} is a superuser")
    if facts.replication_role:
        return CheckResult.ok("replication privilege", f"{facts.user} has REPLICATION")
    role = _quote(facts.user)
    return CheckResult.fail(
        "replication privilege",
        f"{facts.user} lacks REPLICATION",
        f"ALTER ROLE {role} WITH REPLICATION (on RDS: GRANT rds_replication TO {role})",
    )


def check_tables(facts: PostgresFacts, keys: Mapping[str, tuple[str, ...]]) -> CheckResult:
    """Every table exists on the primary as an ordinary table."""
    missing = [name for name in keys if facts.tables[name].kind is None]
    if missing:
        return CheckResult.fail(
            "tables",
            f"not found in database {facts.database}: {name_list(missing)}",
            "create the tables or fix the table names in the config",
        )
    partitioned = [name for name in keys if facts.tables[name].kind == _PARTITIONED_TABLE]
    if partitioned:
        return CheckResult.fail(
            "tables",
            f"partitioned tables are not supported: {name_list(partitioned)}",
            "onboard the partitions as tables of their own",
        )
    other = [name for name in keys if facts.tables[name].kind != _ORDINARY_TABLE]
    if other:
        return CheckResult.fail(
            "tables", f"not tables (views or other relations): {name_list(other)}", "onboard tables only"
        )
    unlogged = [name for name in keys if facts.tables[name].unlogged]
    if unlogged:
        return CheckResult.fail(
            "tables",
            f"UNLOGGED tables are not logically decoded (none of their changes would reach the lake): "
            f"{name_list(unlogged)}",
            "ALTER TABLE ... SET LOGGED, or leave them out of the config",
        )
    return CheckResult.ok("tables", f"{len(keys)} found")


def check_select(facts: PostgresFacts, keys: Mapping[str, tuple[str, ...]]) -> CheckResult:
    """The user may SELECT every table (the connector reads structures; bootstrap reads rows)."""
    denied = [
        name for name in keys if facts.tables[name].kind is not None and not facts.tables[name].can_select
    ]
    if denied:
        return CheckResult.fail(
            "select privilege",
            f"{facts.user} may not SELECT {name_list(denied)}",
            f"GRANT SELECT ON <each table> TO {_quote(facts.user)}",
        )
    return CheckResult.ok("select privilege", f"{facts.user} may SELECT every table")


def check_replica_identity(
    facts: PostgresFacts, keys: Mapping[str, tuple[str, ...]], set_full: bool
) -> CheckResult:
    """Updates and deletes carry enough of the old row: fail without an identity, warn on TOAST loss."""
    name = "replica identity"
    broken: list[str] = []
    other_key: list[str] = []
    toasty: list[str] = []
    to_set: list[str] = []
    not_owned: list[str] = []
    for table_name, key in keys.items():
        table = facts.tables[table_name]
        if table.kind is None:
            continue
        gap = identity_gap(table, key)
        if gap is None:
            continue
        if set_full:
            (to_set if table.owned else not_owned).append(table_name)
        elif gap is IdentityGap.NO_KEY:
            broken.append(f"{table_name} ({_IDENTITY.get(table.replica_identity, table.replica_identity)})")
        elif gap is IdentityGap.OTHER_KEY:
            other_key.append(f"{table_name} (key {', '.join(key)}; identity {_identity_columns(table)})")
        else:
            toasty.append(f"{table_name} ({', '.join(table.toastable)})")
    if not_owned:
        return CheckResult.fail(
            name,
            f"{facts.user} cannot set REPLICA IDENTITY FULL on tables it does not own: "
            f"{name_list(not_owned)}",
            "run ALTER TABLE … REPLICA IDENTITY FULL as the owner",
        )
    if broken:
        return CheckResult.fail(
            name,
            f"updates and deletes would have no old key: {name_list(broken)}",
            "ALTER TABLE … REPLICA IDENTITY FULL (or USING INDEX), or onboard with --replica-identity-full",
        )
    if other_key:
        return CheckResult.fail(
            name,
            "configured key is not the replica identity, so key changes and deletes would not carry "
            f"the old key: {name_list(other_key)}",
            "ALTER TABLE … REPLICA IDENTITY FULL (or USING INDEX on a unique index over exactly the key "
            "columns), or onboard with --replica-identity-full",
        )
    if toasty:
        return CheckResult.warn(
            name,
            "DEFAULT with TOASTable columns, unchanged large values arrive as placeholders: "
            f"{name_list(toasty)}",
            "onboard with --replica-identity-full, or let the applier keep the stored values",
        )
    if to_set:
        return CheckResult.ok(name, f"will set FULL on {name_list(to_set)}")
    return CheckResult.ok(name, "every table identifies its old rows")


#: Array element types (``pg_type.typname``) for whose unchanged TOASTed value Debezium 3.5 has no
#: placeholder: converting it fails, which stops the connector (``event.converting.failure.handling.mode=
#: fail``; Debezium's default, ``warn``, writes NULL).  Measured on the stack, see docs/type-mapping.md.
NO_PLACEHOLDER_ARRAY_ELEMENTS = frozenset({"int2", "bool", "float4", "float8", "numeric", "timestamptz"})


def check_toasted_arrays(facts: PostgresFacts, captures: Sequence[Capture], set_full: bool) -> CheckResult:
    """Refuse, by table and column, a TOASTable array Debezium cannot send unchanged.

    Without REPLICA IDENTITY FULL an update that leaves a TOASTed value unchanged sends Debezium's
    placeholder instead, and for arrays of :data:`NO_PLACEHOLDER_ARRAY_ELEMENTS` Debezium has none: the
    connector stops at the first such update.  With FULL it takes the value from the old row.
    """
    name = "TOASTed arrays"
    found: list[str] = []
    for capture in captures:
        for table in capture.tables:
            facts_of = facts.tables.get(table.name)
            if facts_of is None or facts_of.kind is None or facts_of.replica_identity == "f":
                continue
            if set_full and facts_of.owned:
                continue  # onboarding sets FULL (a table it cannot alter fails the replica identity check)
            columns = [
                f"{column} ({element}[])"
                for column, element in facts_of.toastable_arrays
                if element in NO_PLACEHOLDER_ARRAY_ELEMENTS and (not table.columns or column in table.columns)
            ]
            if columns:
                found.append(f"{table.name} ({', '.join(columns)})")
    if found:
        return CheckResult.fail(
            name,
            "Debezium 3.5 has no placeholder for an unchanged TOASTed value of these arrays, so the first "
            "update that leaves one unchanged stops the connector (replica identity not FULL): "
            f"{name_list(found)}",
            "ALTER TABLE … REPLICA IDENTITY FULL or onboard with --replica-identity-full; or ALTER TABLE … "
            "ALTER COLUMN … SET STORAGE PLAIN where its values always fit in a page; or leave the column "
            "out of the table's columns list",
        )
    return CheckResult.ok(name, "every TOASTable array can be sent unchanged")


def check_publications(facts: PostgresFacts, captures: Sequence[Capture]) -> CheckResult:
    """Each connector's publication can be created, or exists as a table list we may alter."""
    name = "publication"
    problems = []
    for capture in captures:
        publication = capture.ids.publication or ""
        existing = facts.publications.get(publication)
        current = existing.tables if existing is not None else frozenset()
        to_add = [t for t in capture.table_names if t not in current]
        if existing is None and not facts.can_create_in_database:
            problems.append(f"{publication}: {facts.user} lacks CREATE on database {facts.database}")
        elif existing is not None and existing.all_tables:
            problems.append(f"{publication} exists FOR ALL TABLES")
        elif existing is not None and not existing.owned:
            problems.append(f"{publication} exists and is owned by another role")
        elif existing is not None and not {"insert", "update", "delete"} <= set(existing.publishes):
            problems.append(f"{publication} publishes only {', '.join(existing.publishes) or 'nothing'}")
        not_owned = [t for t in to_add if facts.tables[t].kind is not None and not facts.tables[t].owned]
        if not_owned:
            problems.append(f"{publication}: {facts.user} does not own {name_list(not_owned)}")
    if problems:
        return CheckResult.fail(
            name,
            "; ".join(problems),
            "drop the conflicting publication or set publication_name; grant CREATE on the database; "
            "tables must be owned by the user (or create the publication as their owner)",
        )
    states = [
        f"{c.ids.publication} {'exists' if c.ids.publication in facts.publications else 'will be created'}"
        for c in captures
    ]
    return CheckResult.ok(name, name_list(states))


def check_heartbeat(facts: PostgresFacts) -> CheckResult:
    """The heartbeat table exists and is writable, or can be created."""
    heartbeat = facts.heartbeat
    if heartbeat.exists:
        if heartbeat.can_write:
            return CheckResult.ok("heartbeat table", f"{heartbeat.name} exists")
        return CheckResult.fail(
            "heartbeat table",
            f"{facts.user} may not INSERT and UPDATE {heartbeat.name}",
            f"GRANT INSERT, UPDATE ON {heartbeat.name} TO {_quote(facts.user)}",
        )
    creatable = heartbeat.can_create_in_schema if heartbeat.schema_exists else facts.can_create_in_database
    if creatable:
        return CheckResult.ok("heartbeat table", f"{heartbeat.name} will be created")
    return CheckResult.fail(
        "heartbeat table",
        f"{facts.user} cannot create {heartbeat.name}",
        f"create it (see docs/onboarding.md) and GRANT INSERT, UPDATE ON it TO {_quote(facts.user)}",
    )


def check_rewrite_log(facts: PostgresFacts) -> CheckResult:
    """Table rewrites (``ALTER ... TYPE ... USING``, ``SET UNLOGGED``) are logged for the applier, or will
    be (a superuser creates the event trigger); else a warning: those DDLs would leave the lake's old
    values in place, LIVE."""
    name = "table rewrite log"
    log = facts.rewrite_log
    if log.installed:
        return CheckResult.ok(name, f"{REWRITE_LOG} and its event trigger exist")
    if facts.superuser:
        return CheckResult.ok(name, f"{REWRITE_LOG} and its event trigger will be created")
    if log.table_exists and log.trigger_enabled:
        return CheckResult.fail(
            name,
            f"{facts.user} may not read {REWRITE_LOG}",
            f"GRANT USAGE ON SCHEMA cdc_lake TO {_quote(facts.user)}; "
            f"GRANT SELECT ON {REWRITE_LOG} TO {_quote(facts.user)}",
        )
    return CheckResult.warn(
        name,
        f"{REWRITE_LOG} or its table_rewrite event trigger is missing and {facts.user} is no superuser: "
        "a rewrite by ALTER ... TYPE ... USING or SET UNLOGGED would not stop its table",
        'a superuser runs the statements of docs/schema-changes.md ("Table rewrites") once per database',
    )


def check_slots(facts: PostgresFacts, captures: Sequence[Capture], options: PreflightOptions) -> CheckResult:
    """A planned slot that already exists must be a pgoutput slot of this database, unused by others."""
    problems, resumed = [], []
    for capture in captures:
        slot = facts.slots.get(capture.ids.slot or "")
        if slot is None:
            continue
        if slot.slot_type != "logical":
            problems.append(f"{slot.name} is a {slot.slot_type} slot")
        elif slot.plugin != PLUGIN:
            problems.append(f"{slot.name} exists with plugin {slot.plugin}")
        elif slot.database != facts.database:
            problems.append(f"{slot.name} exists on database {slot.database}")
        elif slot.active and capture.connector not in options.registered:
            problems.append(f"{slot.name} is in use by another client")
        else:
            resumed.append(slot.name)
    if problems:
        return CheckResult.fail(
            "replication slot",
            f"belongs to someone else: {'; '.join(problems)}",
            "set slot_name in the config to a free name, or drop that slot if it is abandoned",
        )
    created = _new_slots(facts, captures)
    parts = []
    if created:
        parts.append(f"the connector creates {name_list(created)}")
    if resumed:
        parts.append(f"resumes from {name_list(resumed)}")
    return CheckResult.ok("replication slot", "; ".join(parts))


def check_replica(replica: PgReplicaFacts, required: bool) -> CheckResult:
    """The read replica answers, is a standby, and replays WAL it receives from a primary."""
    name = "replica"
    unconfigured = check_replica_configured(replica.configured, required)
    if unconfigured is not None:
        return unconfigured
    if replica.error is not None:
        return CheckResult.fail(
            name,
            f"{replica.address} unreachable: {replica.error}",
            "start the replica or fix replica: in the config",
        )
    if not replica.in_recovery:
        return CheckResult.fail(
            name,
            f"{replica.address} is not a standby (pg_is_in_recovery() is false)",
            "point replica: at a streaming standby of the primary",
        )
    if replica.receive_lsn is None:
        return CheckResult.fail(
            name,
            f"{replica.address} receives no WAL from a primary",
            "check primary_conninfo and the standby's log",
        )
    if replica.replay_paused:
        return CheckResult.fail(
            name, f"{replica.address} has WAL replay paused", "SELECT pg_wal_replay_resume() on the replica"
        )
    lag = "unknown" if replica.lag_bytes is None else f"{replica.lag_bytes} bytes"
    return CheckResult.ok(name, f"{replica.address} replaying, {lag} behind")


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'

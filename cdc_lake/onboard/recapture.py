"""``cdc-lake onboard SOURCE --after-failover``: go on from a promoted Postgres primary, keeping the lake.

A Postgres logical slot does not follow a failover (before Postgres 17's failover slots): the promoted
replica has no slot, and the old connector's offsets name positions of a primary that is gone.  The
full-copy way out is offboard, onboard, bootstrap (docs/runbooks/position-lost.md).  This one keeps the
lake copies: after ``cdc-lake offboard SOURCE`` (the old connector and its offsets go) and with the
source's config pointing at the new primary, onboarding with ``--after-failover`` creates the new slot and
connector as usual, and each OFFBOARDED table that has a lake copy is *recaptured*
(:mod:`cdc_lake.state.recaptures`): CATCHING_UP again, with

- the topic's end offsets read before the new connector exists: the new capture's first offsets.  The
  applier never lets a batch span them and drops the old primary's re-send marks there
  (:mod:`cdc_lake.apply.plan`): the new primary's stream positions start over below them;
- the new primary's fork point as an ordering value (:meth:`SourceEngine.fork_ordering`, the timeline
  history): a lake row above it is a row of a transaction the new primary never received, or one the new
  capture wrote; a change of the new primary may sort below the first kind.

What the lake cannot have from the stream (changes the new primary made before its slot existed, rows of
transactions it never received) is made exact by ``cdc-lake repair TABLE``, which repairs the keys
``validate`` finds different and every key whose lake row sorts above the fork
(:mod:`cdc_lake_bootstrap.repair`), and only then ends the recapture and its possibly-diverged mark.
Binlog engines need none of this: a GTID failover keeps the connector's position, and
:meth:`~cdc_lake.sources.base.SourceEngine.fork_ordering` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cdc_lake.capture.plan import table_topic
from cdc_lake.config import Config, Source, Table
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.sources.base import SourceEngine
from cdc_lake.sources.checks import CheckResult
from cdc_lake.state import StateStore, TableState

CHECK = "recapture after failover"


@dataclass(frozen=True)
class RecapturePoint:
    """Where a recaptured table's new capture starts: its topic and that topic's end offsets before the
    new connector existed."""

    topic: str
    offsets: dict[int, int]


def check_recapture(
    store: StateStore, source: Source, engine: SourceEngine, tables: Sequence[Table]
) -> CheckResult:
    """Whether ``tables`` can be recaptured: the primary was promoted (its fork point can be read) and every
    table is OFFBOARDED with a lake copy."""
    way_out = f"run cdc-lake offboard {source.name} first"
    try:
        engine.fork_ordering()
    except CdcLakeError as exc:
        return CheckResult.fail(CHECK, str(exc), "point the source's primary at the promoted server")
    problems = []
    for table in tables:
        name = table.qualified_name(source)
        info = store.get_table(name)
        if info is None or store.get_watermark(name) is None:
            problems.append(f"{name} has no lake copy to keep (onboard it without --after-failover)")
        elif info.state is not TableState.OFFBOARDED:
            problems.append(f"{name} is {info.state.value}, not OFFBOARDED ({way_out})")
    if problems:
        return CheckResult.fail(CHECK, "; ".join(problems), "the way out named after each table")
    return CheckResult.ok(CHECK, f"{len(tables)} table(s) keep their lake copies; the primary was promoted")


def recapture_points(config: Config, source: Source, tables: Sequence[Table]) -> dict[str, RecapturePoint]:
    """Each table's topic and its end offsets now: read before the new connector is created."""
    points = {}
    for table in tables:
        topic = table_topic(source, table)
        ends = end_offsets(config.kafka.bootstrap_servers, topic, extra=dict(config.kafka.consumer))
        points[table.qualified_name(source)] = RecapturePoint(topic, ends)
    return points


def record_recaptures(store: StateStore, points: Mapping[str, RecapturePoint], fork: str) -> list[str]:
    """Make each table CATCHING_UP from its new capture, its recapture recorded; returns what changed."""
    changed = []
    for name, point in points.items():
        store.transition(name, TableState.CATCHING_UP)
        why = (
            "capture restarted on a promoted primary without a copy: rows of transactions it never received "
            f"and changes made before its slot may differ; run cdc-lake repair {name}"
        )
        store.start_recapture(name, point.topic, point.offsets, fork, why)
        changed.append(f"recaptured {name} from offsets {point.offsets} of {point.topic} (repair pending)")
    return changed

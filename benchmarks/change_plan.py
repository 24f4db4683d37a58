"""The benchmarks' change mix, defined once: which key each change touches, and how.

A table holds keys ``0 .. rows - 1`` (8 region partitions, ``region = key % 8``).  Each change is, by a
seeded draw: 80% an update of a random existing key, uniform over the whole ``[0, rows)`` range (5% of
all changes draw a random region, so some rows move partition); 10% an insert of the next new key above
the table's (``rows``, ``rows + 1``, ...); 10% a delete of a random existing key.  A deleted key is never
drawn again.  ``apply_bench.produce_events`` turns the plan into Debezium events on Kafka; the growth
part turns its last change per key into the rows of one upsert, so a batch of N changes has the same
shape at every table size and touches every file of the table.

Standard library only: the unit tests import it without Spark or Kafka.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

REGIONS = 8
UPDATE, INSERT, DELETE = "u", "c", "d"


@dataclass(frozen=True)
class Change:
    """One change: its place in the plan (``seq``, from 0), Debezium op, key, and the row's region."""

    seq: int
    op: str
    key: int
    region: int


def change_plan(rows: int, changes: int, seed: int) -> Iterator[Change]:
    """The ``changes`` changes of a ``rows``-row table drawn with ``seed`` (see the module docstring)."""
    rng = random.Random(seed)
    live = rows
    deleted: set[int] = set()
    for seq in range(changes):
        roll = rng.random()
        if roll < 0.9 and roll >= 0.8:
            key, live, op = live, live + 1, INSERT
        else:
            key = rng.randrange(rows)
            while key in deleted:
                key = rng.randrange(rows)
            op = UPDATE if roll < 0.8 else DELETE
            if op == DELETE:
                deleted.add(key)
        region = key % REGIONS if rng.random() > 0.05 else rng.randrange(REGIONS)
        yield Change(seq, op, key, region)


def last_per_key(plan: Iterator[Change]) -> list[Change]:
    """The last change of each key, in key order: what one upsert of the plan writes."""
    last = {change.key: change for change in plan}
    return [last[key] for key in sorted(last)]

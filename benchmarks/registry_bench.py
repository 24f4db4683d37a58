"""cdc-lake's schema registry client against ``confluent_kafka.schema_registry.SchemaRegistryClient``.

What the decoder needs from a registry client is a :class:`~cdc_lake.decode.schema.RegisteredSchema`
(the fastavro-parsed writer schema) per schema id, so both sides are timed to that point: ours is
``SchemaRegistry.get_schema``; Confluent's is ``get_schema(id)`` followed by building the
``RegisteredSchema`` from its text (the parse every decode needs anyway), cached by id as ours is::

    .venv/bin/python benchmarks/registry_bench.py [--url http://127.0.0.1:18081/apis/ccompat/v7]
        [--ids 20] [--rounds 25] [--cached 200000]

- uncached: ``--rounds`` fresh clients each read the first ``--ids`` schema ids the registry holds
  (1, 2, …; discovered first, nothing is registered), against ``--url`` and against a local
  ``http.server`` stub answering every ``/schemas/ids/N`` with one Debezium envelope schema (the
  client's own cost, without the registry's);
- cached: ``--cached`` reads of ids already read, from one client (Confluent's through its own cache;
  the decoder would keep the parsed schemas in a dict of its own in front of it, as ours does).

Reads only; the rounds of the two clients are interleaved so a change in machine load hits both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from support import debezium as dbz  # noqa: E402
from support.http_server import send_json, serving  # noqa: E402

from cdc_lake.decode.registry import SchemaRegistry  # noqa: E402
from cdc_lake.decode.schema import RegisteredSchema  # noqa: E402
from cdc_lake.exceptions import SchemaRegistryError  # noqa: E402


class ConfluentLookup:
    """Confluent's client behind the decoder's interface: its fetch, then the parse, cached by id."""

    def __init__(self, url: str) -> None:
        self.client = SchemaRegistryClient({"url": url, "timeout": 10})
        self.cache: dict[int, RegisteredSchema] = {}
        self.lock = threading.Lock()

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        with self.lock:
            cached = self.cache.get(schema_id)
        if cached is not None:
            return cached
        text = self.client.get_schema(schema_id).schema_str
        with self.lock:
            return self.cache.setdefault(schema_id, RegisteredSchema(schema_id, text or ""))

    def close(self) -> None:
        self.client.__exit__()  # type: ignore[no-untyped-call]


@contextmanager
def stub() -> Iterator[str]:
    """A local registry answering every schema id with one envelope schema."""
    body = {"schema": json.dumps(dbz.pg_envelope())}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a registry answers
        disable_nagle_algorithm = True  # headers and body leave at once (no delayed-ACK wait)

        def do_GET(self) -> None:
            send_json(self, 200, body, "application/vnd.schemaregistry.v1+json")

        def log_message(self, format: str, *args: object) -> None:
            return

    with serving(Handler) as url:
        yield url


def existing_ids(url: str, wanted: int) -> list[int]:
    """The first ``wanted`` schema ids the registry at ``url`` answers."""
    found: list[int] = []
    with SchemaRegistry(url, attempts=1) as registry:
        for schema_id in range(1, 10 * wanted + 100):
            try:
                registry.get_schema(schema_id)
            except SchemaRegistryError:
                continue
            found.append(schema_id)
            if len(found) == wanted:
                return found
    raise SystemExit(f"{url} holds only {len(found)} schema ids below {10 * wanted + 100}")


Lookup = SchemaRegistry | ConfluentLookup
CLIENTS: dict[str, Callable[[str], Lookup]] = {"cdc-lake": SchemaRegistry, "confluent": ConfluentLookup}


def uncached(url: str, ids: list[int], rounds: int) -> dict[str, list[float]]:
    """Milliseconds per uncached read, one figure per round and client."""
    per_read: dict[str, list[float]] = {name: [] for name in CLIENTS}
    for _ in range(rounds):
        for name, make in CLIENTS.items():
            lookup = make(url)
            started = time.perf_counter()
            for schema_id in ids:
                lookup.get_schema(schema_id)
            per_read[name].append((time.perf_counter() - started) * 1000 / len(ids))
            lookup.close()
    return per_read


def cached(url: str, ids: list[int], reads: int) -> dict[str, float]:
    """Microseconds per cached read: ours, and Confluent's own cache (its ``Schema``, not parsed)."""
    ours = SchemaRegistry(url)
    theirs = SchemaRegistryClient({"url": url, "timeout": 10})
    reads_of: dict[str, Callable[[int], object]] = {
        "cdc-lake": ours.get_schema,
        "confluent": theirs.get_schema,
    }
    per_read: dict[str, float] = {}
    for name, read in reads_of.items():
        for schema_id in ids:
            read(schema_id)
        started = time.perf_counter()
        for i in range(reads):
            read(ids[i % len(ids)])
        per_read[name] = (time.perf_counter() - started) * 1e6 / reads
    ours.close()
    theirs.__exit__()  # type: ignore[no-untyped-call]
    return per_read


def report(title: str, per_read: dict[str, list[float]]) -> None:
    for name, figures in per_read.items():
        print(
            f"{title:<28} {name:<9} ms/read median {statistics.median(figures):6.2f} "
            f"min {min(figures):6.2f} max {max(figures):6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:18081/apis/ccompat/v7")
    parser.add_argument("--ids", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--cached", type=int, default=200_000)
    args = parser.parse_args()
    ids = existing_ids(args.url, args.ids)
    report("uncached, stack registry", uncached(args.url, ids, args.rounds))
    with stub() as url:
        report("uncached, local stub", uncached(url, list(range(1, args.ids + 1)), args.rounds))
    for name, micros in cached(args.url, ids, args.cached).items():
        print(f"{'cached':<28} {name:<9} us/read {micros:6.2f}")


if __name__ == "__main__":
    main()

"""Bringing one source's connectors, publications and slots in line with a plan, one undoable step at a time.

For each planned connector: create what it needs on the source, register or update it in
Kafka Connect, wait until its task is RUNNING and it streams (a heartbeat newer than the
registration), then align the publication and make sure its topics exist.  An existing
connector whose config changes is stopped first, so the heartbeat that proves streaming can
only come from the new configuration, and only then does the publication gain tables: no
change is filtered out by a connector that does not know its table yet.

Every step is journaled with its undo, so a failed onboarding can take back what it made.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdc_lake.capture.plan import (
    ConnectorPlan,
    render_config,
    table_topic,
    tier0_connector_name,
)
from cdc_lake.config import Config, Source, Table
from cdc_lake.connect.client import FAILED, KafkaConnectClient
from cdc_lake.connect.restart import forget_transaction_progress, restart_at_transaction_start, stop
from cdc_lake.connect.streaming import heartbeat_count, wait_streaming
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.onboard.topics import ensure_topics
from cdc_lake.sources.base import Change, ConnectorEndpoints, PreflightOptions, SourceEngine
from cdc_lake.sources.settings import CaptureIds

_RESTART_SECONDS = 30.0
_POLL_SECONDS = 0.5


@dataclass
class Journal:
    """What a run changed, in order, with warnings for what it deliberately left behind."""

    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, *changes: Change) -> None:
        """Record changes that were made."""
        self.changes.extend(changes)

    @property
    def actions(self) -> list[str]:
        """Descriptions of every change, in order."""
        return [change.description for change in self.changes]

    def rollback(self) -> tuple[list[str], list[str]]:
        """Undo the undoable changes, newest first; returns (what was undone, what is left)."""
        undone: list[str] = []
        left: list[str] = []
        for change in reversed(self.changes):
            if change.undo is None:
                left.append(change.description)
                continue
            try:
                undone.append(change.undo())
            except CdcLakeError as exc:
                left.append(f"{change.description} (undo failed: {exc})")
        return undone, left


class Reconciler:
    """Applies connector plans for one source, journaling every change."""

    def __init__(
        self,
        config: Config,
        source: Source,
        engine: SourceEngine,
        connect: KafkaConnectClient,
        options: PreflightOptions,
        endpoints: ConnectorEndpoints,
        timeout: float,
    ) -> None:
        self.config = config
        self.source = source
        self.engine = engine
        self.connect = connect
        self.options = options
        self.endpoints = endpoints
        self.timeout = timeout
        self.journal = Journal()

    def render(self, plan: ConnectorPlan) -> dict[str, str]:
        """The Connect config of ``plan``."""
        params = self.engine.connector_params(plan.capture, self.endpoints)
        return render_config(self.source.engine, plan, params)

    def ensure(self, plan: ConnectorPlan) -> str:
        """Make ``plan``'s connector exist, stream, and read exactly its tables; returns what happened.

        The answer is ``created``, ``updated`` or ``unchanged``.
        """
        desired = {**self.render(plan), "name": plan.name}
        capture = plan.capture
        self.journal.add(*self.engine.prepare(capture, self.options))
        previous = self.connect.get_config(plan.name) if plan.name in self.connect.list_connectors() else None
        bootstrap = self.config.kafka.bootstrap_servers
        kafka = dict(self.config.kafka.consumer)
        if previous == desired:
            outcome = "unchanged"
            self._restart_failed(plan.name)
            self.connect.wait_running(plan.name, timeout=self.timeout)
            if heartbeat_count(bootstrap, plan.heartbeat_key, kafka) == 0:
                wait_streaming(bootstrap, plan.name, plan.heartbeat_key, 0, self.timeout, kafka)
        else:
            if previous is None:
                outcome = "created"
                # A slot engine's connector creates its slot on first start, so a new connector owns it.
                slot = capture.ids.slot if self.engine.capabilities.replication_slots else None
                slot_before = slot is not None and self.engine.slot_exists(slot)
                baseline = heartbeat_count(bootstrap, plan.heartbeat_key, kafka)
                if slot is not None and not slot_before:
                    # Offsets a deleted namesake left in Connect would point into a slot that is gone.
                    self.connect.create_stopped(plan.name, desired)
                    self.connect.reset_offsets(plan.name)
                    self.connect.resume(plan.name)
                else:
                    self.connect.create_or_update(plan.name, desired)
                self.journal.add(
                    Change(
                        f"registered connector {plan.name}",
                        undo=lambda: self._undo_new(plan.name, slot, slot_before),
                    )
                )
            else:
                outcome = "updated"
                self._stop(plan.name)
                self._forget_progress(plan.name)
                baseline = heartbeat_count(bootstrap, plan.heartbeat_key, kafka)
                self.connect.create_or_update(plan.name, desired)
                old = previous
                self.journal.add(
                    Change(f"updated connector {plan.name}", undo=lambda: self._restore(plan.name, old))
                )
                self.connect.resume(plan.name)
            self.connect.wait_running(plan.name, timeout=self.timeout)
            wait_streaming(bootstrap, plan.name, plan.heartbeat_key, baseline, self.timeout, kafka)
        self.journal.add(*self.engine.publish(capture))
        topics = [table_topic(self.source, table) for table in capture.tables]
        created = ensure_topics(
            self.config,
            topics,
            partitions=int(desired["topic.creation.default.partitions"]),
            replication_factor=int(desired["topic.creation.default.replication.factor"]),
        )
        if created:
            self.journal.add(Change(f"created topics {', '.join(created)}"))
        return outcome

    def retire(self, name: str, tables: Sequence[Table], drop_slot: bool) -> None:
        """Delete connector ``name``; drop its slot and publication if ``drop_slot``, else keep both.

        Slot and publication names come from the registered config, else from the naming rules
        applied to ``tables`` (the source's tables the connector may have captured).
        """
        registered = name in self.connect.list_connectors()
        stored: Mapping[str, str] = self.connect.get_config(name) if registered else {}
        slot, publication = self._fallback_names(name, tables)
        if registered:
            if drop_slot:
                self._forget_offsets(name)
            self.connect.delete(name)
            self.journal.add(Change(f"deleted connector {name}"))
        done, warnings = self.engine.release(
            stored.get("slot.name", slot), stored.get("publication.name", publication), drop_slot
        )
        self.journal.add(*(Change(line) for line in done))
        self.journal.warnings.extend(warnings)

    def sweep(self, tables: Sequence[Table], drop_slot: bool) -> None:
        """Release the slots and publications any connector of ``tables`` may have left behind."""
        ids = self.source.capture_ids([table.name for table in tables])
        names = [
            *(_slot_and_publication(ids[table.name]) for table in tables),
            _slot_and_publication(ids[None]),
        ]
        for slot, publication in dict.fromkeys(names):
            done, warnings = self.engine.release(slot, publication, drop_slot)
            self.journal.add(*(Change(line) for line in done))
            self.journal.warnings.extend(warnings)

    def _fallback_names(self, name: str, tables: Sequence[Table]) -> tuple[str | None, str | None]:
        ids = self.source.capture_ids([table.name for table in tables])
        for table in tables:
            if tier0_connector_name(self.source, table.name) == name:
                return _slot_and_publication(ids[table.name])
        return _slot_and_publication(ids[None])

    def _stop(self, name: str) -> None:
        """Stop the connector and wait until its tasks are gone, so no old task emits another heartbeat."""
        stop(self.connect, name, self.timeout)

    def _forget_progress(self, name: str) -> None:
        """Make the stopped connector ``name`` start again at the start of its transaction."""
        keys = self.engine.capabilities.transaction_progress_offset_keys
        if forget_transaction_progress(self.connect, name, keys):
            self.journal.add(Change(f"connector {name} resumes at the start of its last transaction"))

    def _restart_failed(self, name: str) -> None:
        """Restart ``name`` and its FAILED tasks: what they lacked was just re-created (the way out of
        a task failed on a dropped publication, docs/runbooks/connector-failed.md)."""

        def failed() -> bool:
            status = self.connect.status(name)
            return status.state == FAILED or any(task.state == FAILED for task in status.tasks)

        if not failed():
            return
        keys = self.engine.capabilities.transaction_progress_offset_keys
        restart_at_transaction_start(self.connect, name, keys, self.timeout)
        self.journal.add(Change(f"restarted connector {name} and its failed tasks"))
        # The restart is asynchronous: the FAILED state lingers until the worker takes it up.
        deadline = time.monotonic() + min(self.timeout, _RESTART_SECONDS)
        while failed() and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)

    def _forget_offsets(self, name: str) -> None:
        """Stop ``name`` and reset its offsets: they point into a slot or binlog position being dropped."""
        self._stop(name)
        self.connect.reset_offsets(name)
        self.journal.add(Change(f"reset the stored offsets of connector {name}"))

    def _undo_new(self, name: str, slot_name: str | None, slot_before: bool) -> str:
        if name in self.connect.list_connectors():
            self._forget_offsets(name)
        self.connect.delete(name)
        done = [f"deleted connector {name}"]
        if slot_name is not None and not slot_before:
            released, _ = self.engine.release(slot_name, None, drop_slot=True)
            done += released
        return "; ".join(done)

    def _restore(self, name: str, previous: Mapping[str, str]) -> str:
        self.connect.create_or_update(name, previous)
        self.connect.resume(name)
        return f"restored the previous config of connector {name}"


def _slot_and_publication(ids: CaptureIds) -> tuple[str | None, str | None]:
    return ids.slot, ids.publication

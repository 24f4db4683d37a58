"""Capture planning: what every stage knows about a source's Debezium capture, decided in one place.

Which connectors capture a source's tables is planned from the config alone
(:mod:`~cdc_lake.capture.plan`): one connector per tier-0 table and one shared by the rest, their
names, slots, publications and server ids, each table's topic, each connector's heartbeat topic and
its Kafka Connect config rendered from the engine's template; the environment variable that carries
the primary's password to the Connect worker is read from the config file
(:mod:`~cdc_lake.capture.secrets`).  The names are stable functions of the config, so every stage
that plans a source gets the same answer without asking a service: onboarding creates and retires
the connectors, ``lag`` measures what each keeps on the primary, the lake target (which both writers
use), the bootstrap's hand-off and ``validate`` read a table's topic.

The stages never import each other (docs/architecture.md).  The one that must change another
stage's objects, a re-bootstrap whose table's frozen column list changed, takes a
:data:`~cdc_lake.capture.update.ConnectorUpdate`; the command line passes onboarding's.
"""

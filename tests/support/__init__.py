"""Helpers of the unit tests, the integration tests and the benchmarks, one of each, by what they serve.

pytest puts ``tests`` on ``sys.path`` (``pythonpath`` in pyproject.toml's ``[tool.pytest.ini_options]``;
the test directories are not packages), so every test imports ``support.<module>``; the benchmarks
that use it insert the same directory.  No test module imports another: what two test modules share
is here.

Messages, schemas and stand-ins (no stack needed):

- ``debezium``: Avro schemas and records shaped like Debezium's; ``wire``: Confluent's wire encoding.
- ``fake_registry``: the schema registry in memory, and a tiny HTTP server speaking its REST API;
  ``http_server``: a local HTTP server for the tests of HTTP clients.
- ``change_model``: a reference model of a replicated table, Debezium's messages for it, and the
  applier's merge (the property suites', also run on Spark by the stack tests).
- ``recorded``: the real Debezium messages recorded into ``tests/unit/data/recorded/``.
- ``fake_engine`` (with its connector template ``fake_connector.json``): a made-up source engine.
- ``caught_up``: an applier as the bootstrap stage sees it; ``spark_settings``: the ``spark`` and
  ``lake`` config sections; ``spark_failures``: Spark failures' texts as recorded.
- ``configs``: a one-source config file and a Postgres source; ``postgres_facts``: what the local
  stack's Postgres reports to the preflight checks; ``schedule``: a table target and a counting runner
  for the run service's schedule.
- ``jmx_exporter``: the shipped JMX exporter rules, applied; ``metrics_scrape``: a scrape of every
  metric family; ``processes``: the processes below one process; ``imports``: which heavy libraries
  some code imports, in a fresh interpreter.

The stack (integration tests and benchmarks):

- ``common``: unique name suffixes, :func:`~support.common.wait_until`, the CLI in-process
  (:func:`~support.common.cli_run`, one-line failures), and the one config-file writer
  (:func:`~support.common.write_config`, with :func:`~support.common.write_config_in` and
  :func:`~support.common.write_and_load` on top).
- ``compare``: the one lake-versus-source comparison, its per-type normalisation (:func:`normalize`).
- ``second_reader``: the second reader of lake tables (hudi-rs lists the committed file slices,
  pyarrow and fastavro read them), and its S3 options; ``trino_reader``: the third reader, Trino.
- ``spark``: the shared local SparkSession with the Hudi bundle.
- ``memory_format``: a lake format keeping its tables in memory.
- ``onboard``: connectors in Connect, Kafka keys, onboarding while a writer runs.
- ``bootstrap``: a throwaway source database on the stack (:class:`~support.bootstrap.SourceDb`), its
  config (:func:`~support.bootstrap.write_db_config`), the real ``onboard``, a concurrent writer,
  applying until LIVE, killing a bootstrap, and :func:`~support.bootstrap.assert_lake_equals_source`.
- ``apply``: captured tables with their own connectors, applier configs, recording tables CATCHING_UP
  without onboarding, workloads, synthetic Debezium topics, and
  :func:`~support.apply.assert_lake_matches`.
- ``engines``: what differs per source engine in the behaviour suites (:data:`STACK_ENGINES`).
- ``ops``: an alert checked three ways (``lag``, metrics, promtool).
- ``torture``: the type torture matrix, its table and writer, and the two-reader comparison.
- ``fuzz``: the differential fuzzer's cases (saved under ``tests/integration/data/fuzz_regressions/``).
"""

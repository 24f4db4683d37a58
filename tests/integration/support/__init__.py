"""Helpers of the integration tests (and the benchmarks), one of each, by what they serve.

pytest puts ``tests/integration`` on ``sys.path`` (rootdir-relative "prepend" import mode: the test
directories are not packages), so tests import ``support.<module>``; the benchmarks insert the same
directory.

- ``common``: unique name suffixes, :func:`~support.common.wait_until`, the CLI in-process
  (:func:`~support.common.cli_run`, one-line failures), and the one config-file writer
  (:func:`~support.common.write_config`, with :func:`~support.common.write_config_in` and
  :func:`~support.common.write_and_load` on top).
- ``compare``: the one lake-versus-source comparison, its per-type normalisation (:func:`normalize`).
- ``second_reader``: the second reader of lake tables (hudi-rs lists the committed file slices,
  pyarrow and fastavro read them), and its S3 options.
- ``spark``: the shared local SparkSession with the Hudi bundle.
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
"""

"""The lake-table contract: what every lake table is, whichever stage writes it.

The bootstrap (``bootstrap/``) and the applier (``cdc_lake/apply``) both write lake tables and depend on
this package, never on each other:

- :mod:`cdc_lake.lake.columns`: the metadata columns every lake table carries besides the source's;
- :mod:`cdc_lake.lake.schema`: the lake types of source columns and how a table's columns may evolve;
- :mod:`cdc_lake.lake.schema_change`: a new writer schema classified against the table, and the
  table's schema policy;
- :mod:`cdc_lake.lake.checkpoint`: the Kafka offsets stored in each Hudi commit (where apply resumes);
- :mod:`cdc_lake.lake.commit_metadata`: everything a commit records besides its rows, the one owner of
  the stored keys;
- :mod:`cdc_lake.lake.target`: one configured table as a lake table (topic, base path, its spec);
- :mod:`cdc_lake.lake.layout`: the layout settings a table is created with and
  :class:`~cdc_lake.lake.layout.TableSpec`, one table as a format writes it;
- :mod:`cdc_lake.lake.format`: the lake format (:class:`~cdc_lake.lake.format.LakeFormat`: exists, read,
  write, commits, remove) and the loader table naming each format's class;
- :mod:`cdc_lake.lake.applier`: the applier as the bootstrap sees it (catch a table up), wired in by
  the command line.

Every Hudi call itself (Spark options, writes, reads, the timeline, table properties) is in
:mod:`cdc_lake.hudi`, whose :class:`~cdc_lake.hudi.format.HudiFormat` implements the lake format.
"""

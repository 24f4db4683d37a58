"""The reviewed Debezium connector templates: ``templates/<engine>.json``, one flat Kafka Connect config each.

This package holds data only.  :mod:`cdc_lake.connect.render` fills a template's ``{{placeholder}}``
markers for one source, :mod:`cdc_lake.connect.client` registers the result with Kafka Connect;
README.md says what the Connect worker needs.
"""

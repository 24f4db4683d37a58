"""The incremental applier: Debezium change events from Kafka into Hudi upserts and deletes."""

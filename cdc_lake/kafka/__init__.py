"""Kafka access shared by the applier, the bootstrap and the tools: offsets, ranges, consumers."""

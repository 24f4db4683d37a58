"""Registering lake tables in catalogs, so readers query ``database.table`` instead of a base path."""

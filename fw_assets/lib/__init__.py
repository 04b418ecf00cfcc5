"""Helpers with no Dagster definitions in them: SQL loading, publishing, progress, manifests."""

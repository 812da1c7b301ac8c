"""Ingest: markdown chunking and sources."""

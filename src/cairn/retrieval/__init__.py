"""Retrieval: pipeline stages over candidate sets."""

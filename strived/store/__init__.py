"""The store: a library folder holding an SQLite database, caches and the dense index."""

from .library import Library, SCHEMA_VERSION

__all__ = ["Library", "SCHEMA_VERSION"]

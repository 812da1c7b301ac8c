"""Storage: the narrow protocol the kernel writes through, and its backends."""

from cairn.store.base import ChangeSet, Store

__all__ = ["ChangeSet", "Store"]

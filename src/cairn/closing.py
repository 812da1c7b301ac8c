"""``Closing``: the base of what holds a resource until it is closed (a ``Memory``, a
client), so that each says only how it closes and a ``with`` block closes it alike."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

__all__ = ["Closing"]


class Closing(ABC):
    """Close it when done: ``close()``, or use it in a ``with`` block, which closes it."""

    @abstractmethod
    def close(self) -> None:
        """Release what it holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

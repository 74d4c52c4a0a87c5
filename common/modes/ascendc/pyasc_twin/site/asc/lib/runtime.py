"""The twin's ``asc.lib.runtime``: a stream handle for ``kernel[core_num, stream]`` and nothing to wait for.

On the twin a launch returns when every block has run, so ``synchronize`` has nothing to do.
"""

from __future__ import annotations


class Stream:
    """The host's one stream: launches run in order, each to completion."""

    def __repr__(self) -> str:
        return "Stream(host)"


_STREAM = Stream()


def current_stream() -> Stream:
    return _STREAM


def synchronize() -> None:
    """Nothing is in flight on the twin."""

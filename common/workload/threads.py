"""torch's intra-op thread count, which the lab sets once per process (portable backend)."""

from __future__ import annotations

from common.errors import LabError


def use_threads(n: int = 1) -> int:
    """Set torch's intra-op thread count (portable backend); returns the count now in use."""
    import torch

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LabError(f"thread count {n!r} is not a positive integer", "pass 1 or more")
    torch.set_num_threads(n)
    return torch.get_num_threads()

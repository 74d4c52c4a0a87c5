# TEST DOUBLE for the NPU dry run: the stand-in for torch_npu's PROF_CONFIG_PATH start-up; never used outside tests.
"""What ``import torch_npu`` does with ``PROF_CONFIG_PATH`` set (torch_npu ``profiler/_non_intrusive_profile.py``).

``dynamic_profile.init(<PROF_CONFIG_PATH>)``, then a global optimizer step post-hook: each time a
native ``torch.optim`` optimizer has taken a step more than any before, ``dynamic_profile.step()``.
A program that never steps an optimizer (inference) is never profiled this way.
"""

from __future__ import annotations

import os

from torch.optim.optimizer import register_optimizer_step_post_hook

from torch_npu.profiler import dynamic_profile

_steps: dict[int, int] = {}
_counted = [0]


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    _steps[id(optimizer)] = _steps.get(id(optimizer), 0) + 1
    if _steps[id(optimizer)] > _counted[0]:
        _counted[0] = _steps[id(optimizer)]
        dynamic_profile.step()


def init() -> None:
    path = os.environ.get("PROF_CONFIG_PATH", "")
    if not path:
        return
    dynamic_profile.init(path, via="PROF_CONFIG_PATH")
    register_optimizer_step_post_hook(_after_optimizer_step)

"""What torch's dispatcher says about an op name: asked where torch is loaded, read where it is not.

The profiled program has torch loaded; the lab's process that turns its trace into msprof's files
need not. The start-up hook (``autoprofile/sitecustomize.py``) loads this file by path, asks it about
every ``aten::`` name the trace holds and writes the answers beside the trace; ``torch_ops`` uses those
answers, and asks torch itself only for a trace that carries none. Standard library and the given
torch module only: the hook never imports the lab's packages into the user's program.
"""

from __future__ import annotations


def decomposes(torch, name: str) -> bool:
    """An aten op that is only a composition of others (every functional overload CompositeImplicitAutograd,
    e.g. ``aten::adaptive_avg_pool2d``, ``aten::max_pool2d``): the ops it calls do the work. The
    ``out=`` overloads are left aside: the profiler names the functional op."""
    if not name.startswith("aten::"):
        return False
    packet = getattr(torch.ops.aten, name[len("aten::") :], None)
    if packet is None:
        return False
    overloads = [f"{name}.{o}" if o != "default" else name for o in packet.overloads() if not o.endswith("out")]
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        return bool(overloads) and all(has(o, "CompositeImplicitAutograd") for o in overloads)
    except RuntimeError:  # an overload the dispatcher does not register (aten::__or__.bool): not a composition
        return False


def table(torch, names) -> dict[str, bool]:
    """``{name: decomposes}`` for the distinct ``aten::`` names among ``names``."""
    return {name: decomposes(torch, name) for name in sorted(set(names)) if name.startswith("aten::")}

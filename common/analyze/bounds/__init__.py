"""What bounds it: one home for the lab's three bottleneck questions, each a module of pure functions.

op.py      per op: the lower bound from the work in its shapes over the device peaks (the roofline),
           the busiest pipe, and the run-level hint; the device peaks (``Peaks``, ``DEVICE_PEAKS``)
step.py    per step: Computing / Communication(Not Overlapped) / Free, and which part bounds the step
kernel.py  per kernel (mode 02): launch, memory, compute, stall or access pattern, with the fix
"""

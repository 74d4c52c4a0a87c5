"""msprof lab's shared package: workload, env, formats, collect, analysis, report.

Importing ``common`` stays light (standard library only); heavy modules import torch themselves.
"""

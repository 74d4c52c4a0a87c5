"""From finding to fix: each verdict's remedy applied to the lesson that found it, measured again the same way.

``pairs``: which finding each fix answers; ``sides``: one run of a lesson, read back; ``workloads``: which
model each pair runs on; ``run``: the interleaved runs and the judgement; ``report``: fix_out/'s files.
"""

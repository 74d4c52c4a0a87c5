"""Profiles at real-model scale: a generator of large msprof / torch_npu files and a benchmark.

    python -m common.bench make --rows 1000000 --events 5500000   # files under bench/out/
    python -m common.bench run                                    # what ``nox -s bench`` runs
"""

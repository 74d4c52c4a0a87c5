"""Profiles at real-model scale: a generator of large msprof / torch_npu files and a benchmark.

python -m common.bench make --rows 1000000 --events 5500000   # files under bench/out/
python -m common.bench run                                    # what ``nox -s bench`` runs

__main__.py  the command line (make, run, loop; _child for the measured children)
generate.py  the large profiles, in msprof's / torch_npu's exact schema
children.py  what runs inside each measured child: the lab's measurements, the other tools' baselines
measure.py   running the children: wall, CPU, peak RSS (wait4), medians, one table row per tool
sections.py  the report of ``run``: CSV, trace, database and cluster sections
loop.py      ``loop``: the card command, process by process
"""

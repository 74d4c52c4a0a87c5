"""``python -m common <command>``: the lab's tools for any output directory.

  report <dir>     top ops, op families, per-forward counts, step table; writes <dir>/report.md
  backend          print which backend this machine gets and why
"""

from __future__ import annotations

import argparse

from common.errors import ArgumentParser


def _report(args: argparse.Namespace) -> int:
    from common.report import directory_report, write_report_md

    text, markdown = directory_report(args.dir)
    print(text)
    print(write_report_md(args.dir, markdown))
    return 0


def _backend(args: argparse.Namespace) -> int:
    from common.env import detect

    print(detect().banner())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m common", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    report = sub.add_parser("report", help="report on a profile directory")
    report.add_argument("dir", help="a mode's prof_out/, a PROF_*/ or *_ascend_pt/ folder, or any folder holding their files")
    report.set_defaults(func=_report)
    sub.add_parser("backend", help="show the detected backend").set_defaults(func=_backend)
    args = parser.parse_args(argv)
    return args.func(args)

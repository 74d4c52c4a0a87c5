"""fix_out/: fix.json (every pair, the NPU-only ones listed), fix.md and report.html, and the terminal's text."""

from __future__ import annotations

import json
import platform
import socket
import time
from pathlib import Path

from common.modes.fix.pairs import NPU_ONLY
from common.modes.fix.run import npu_only_json
from common.render.fix import fix_report
from common.render.html import report_page
from common.render.text import render_markdown, render_text


def header_lines(workload: str | None, repeat: int) -> list[str]:
    return [
        f"portable backend on {socket.gethostname()} ({platform.machine()}, one intra-op thread per run), "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; workload: {workload or 'TinyMLP (the lab default set-up)'}; "
        f"{repeat} run(s) per side, interleaved"
    ]


def write_outputs(out: Path, pairs: list[dict], skipped: dict[str, str], workload: str | None, repeat: int) -> str:
    """Write fix.json, fix.md and report.html into ``out``; return the text for the terminal."""
    listed = pairs + [npu_only_json(p) for p in NPU_ONLY]
    head = header_lines(workload, repeat)
    (out / "fix.json").write_text(json.dumps({"header": head, "pairs": listed, "skipped": skipped}, indent=1) + "\n")
    report = fix_report(listed, skipped, head)
    (out / "fix.md").write_text(render_markdown(report))
    (out / "report.html").write_text(report_page(report))
    return render_text(report) + f"\n(written to {out}/fix.json, fix.md, report.html)"

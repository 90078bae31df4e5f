"""Write the README's printed outputs and timings from a real run, stamped.

    python benchmarks/readme_outputs.py            # outputs + the demo's and the CLI day's times
    python benchmarks/readme_outputs.py --suite    # ... and the time of the whole test suite

Runs every command and Python example the README shows (tests/readme_blocks.py
finds them), replaces the outputs under them with what they printed, and
writes the "Quick start" timings block: how long ``packboost demo``, the
command-line day and (with ``--suite``, else the figure already there) ``pytest``
took, with the date, the commit and the hardware of the run. The tests rerun
the same commands and compare everything but the times, so the README never
shows an output the code no longer prints; only the times are as of the stamp.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from readme_blocks import (  # noqa: E402
    README,
    readme_examples,
    run_command,
    run_python,
)

_TIMINGS = re.compile(r"(<!-- readme-timings: begin.*?-->\n)(.*?)(<!-- readme-timings: end -->)",
                      re.S)


def hardware() -> str:
    """The CPU model and the cores this process may use (``lscpu``, ``sched_getaffinity``)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores"


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "README.md"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return head + ("+" if dirty else "")


def _replace_output(text: str, shown: str, printed: str, after: int) -> tuple[str, int]:
    """``text`` with the first ``shown`` at or after ``after`` replaced by ``printed``."""
    start = text.index(shown, after)
    return text[:start] + printed + text[start + len(shown):], start + len(printed)


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _seconds(value: float) -> str:
    if value < 10:
        return f"{value:.1f} s"
    return f"{value:.0f} s" if value < 90 else f"{value / 60:.1f} min"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="store_true",
                        help="also time the whole test suite (minutes)")
    args = parser.parse_args(argv)

    measured = commit()   # the code measured, before anything below can change
    text = README.read_text()
    commands, examples = readme_examples(text)
    times, cpu_times, cursor = {}, {}, 0
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        for command in commands:
            start, cpu_start = time.perf_counter(), _children_cpu()
            printed = run_command(command, scratch)
            key = "demo" if command.argv == ["demo"] else "day"
            times[key] = times.get(key, 0.0) + time.perf_counter() - start
            cpu_times[key] = cpu_times.get(key, 0.0) + _children_cpu() - cpu_start
            cursor = text.index(command.text, cursor) + len(command.text) + 1
            if command.output:
                text, cursor = _replace_output(text, command.output, printed, cursor)
        os.chdir(scratch)
        namespace = {"__name__": "readme"}
        for index, example in enumerate(examples):
            printed = run_python(example, namespace, f"README.md python block {index}")
            cursor = text.index(example.code) + len(example.code)
            text, _ = _replace_output(text, example.output, printed, cursor)
    os.chdir(ROOT)

    suite = re.search(r"`pytest` (.*?) \(the install", _TIMINGS.search(text).group(2))
    suite = suite.group(1) if suite else "(not measured)"

    def write(suite: str) -> str:
        stamp = (f"Measured {datetime.date.today().isoformat()} at commit `{measured}` on "
                 f"{hardware()} (load average {load:.1f} at the start): `packboost demo` "
                 f"{_seconds(times['demo'])} ({_seconds(cpu_times['demo'])} of CPU time), "
                 f"the command-line day below {_seconds(times['day'])} "
                 f"({_seconds(cpu_times['day'])} of CPU time), `pytest` {suite} (the "
                 f"install before them builds the kernels: a few minutes). Written by "
                 f"`python benchmarks/readme_outputs.py`.\n")
        README.write_text(_TIMINGS.sub(lambda match: match.group(1) + stamp + match.group(3),
                                       text))
        return stamp

    # The outputs first: the suite's tests/test_readme.py checks them.
    stamp = write(suite)
    if args.suite:
        start, cpu_start = time.perf_counter(), _children_cpu()
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                                cwd=ROOT, capture_output=True, text=True)
        print("\n".join(result.stdout.splitlines()[-15:]))
        if result.returncode != 0:
            print("the test suite failed: its time not written", file=sys.stderr)
            return 1
        stamp = write(f"{_seconds(time.perf_counter() - start)} "
                      f"({_seconds(_children_cpu() - cpu_start)} of CPU time)")
    print(stamp, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

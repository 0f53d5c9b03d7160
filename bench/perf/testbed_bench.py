"""Figures of the test cluster and the playbooks (prints them; no assertions).

    .venv/bin/python -m bench testbed_bench [--cold] [--pairs 2]

- testbed creation: cached (the host image exists; containers, keys, inventory made) and, with --cold,
  from nothing (the host image removed first and rebuilt: debootstrap + docker import);
- site.yml on fresh hosts (first run) and again (second run, changed=0);
- distributing the project's images to every host (4 with 2 pairs) when no host has them.

Runs on a testbed of its own (a temporary folder), so `make testbed` is left alone; removed at the end.
Times include this machine's load: on a shared machine they vary by a factor of two or more.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import REPO
from bench.common.cli import entry, parser, positive_int

ROOT = REPO
VENV_BIN = Path(sys.executable).parent


def play(inventory: Path, playbook: str, work: Path, *args: str) -> tuple[float, str]:
    extra = {"images_cache_dir": str(work / "images"), "host_facts_dir": str(work / "facts")}
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), playbook, "-e", json.dumps(extra), *args],
        cwd=ROOT / "playbooks",
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"testbed_bench: {playbook} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", proc.stdout))
    return elapsed, f"changed={changed}"


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--cold", action="store_true", help="also time building the host image from nothing")
    ap.add_argument("--pairs", type=positive_int, default=2)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="demuxlab-tb-bench-"))
    os.environ["DEMUXLAB_TESTBED_DIR"] = str(work / "state")
    os.environ["DEMUXLAB_TESTBED_INVENTORY"] = str(work / "inventory")
    from demuxlab import testbed as tb

    print(f"testbed_bench: {args.pairs} pairs, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    try:
        if args.cold:
            tag = tb.image_tag()
            subprocess.run(["docker", "rmi", tag], capture_output=True, check=False)
            t0 = time.monotonic()
            tb.build_image(log=lambda m: None)
            print(f"host image from nothing (debootstrap + import): {time.monotonic() - t0:7.1f} s")
        t0 = time.monotonic()
        state = tb.up(args.pairs, log=lambda m: None)
        print(f"testbed up, image cached ({len(state['hosts'])} hosts):  {time.monotonic() - t0:7.1f} s")
        inventory = work / "inventory"
        for name in ("server", "client"):
            probe = subprocess.run(
                ["docker", "image", "inspect", f"demuxlab/{name}:latest"], capture_output=True, check=False
            )
            if probe.returncode != 0:
                subprocess.run(
                    ["bash", str(ROOT / "images/build-image.sh"), name], check=True, capture_output=True
                )
        s1, c1 = play(inventory, "site.yml", work, "-e", "host_facts_store=false")
        print(f"site.yml, first run:                      {s1:7.1f} s ({c1})")
        s2, c2 = play(inventory, "site.yml", work, "-e", "host_facts_store=false")
        print(f"site.yml, second run:                     {s2:7.1f} s ({c2})")
        for h in state["hosts"]:
            subprocess.run(
                [
                    "docker",
                    "exec",
                    h["container"],
                    "docker",
                    "rmi",
                    "demuxlab/server:latest",
                    "demuxlab/client:latest",
                ],
                capture_output=True,
                check=False,
            )
        d, c3 = play(inventory, "images.yml", work)
        print(f"images to {len(state['hosts'])} hosts (none had them):       {d:7.1f} s ({c3})")
        d2, c4 = play(inventory, "images.yml", work)
        print(f"images again (every host has them):       {d2:7.1f} s ({c4})")
    finally:
        tb.down()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    entry(main)

"""What a benchmark's figures depend on besides tierpool: the machine's
cores, and how its idle CPUs sleep.

A call to a pool on the same machine is a few round trips, and each wakes a
thread whose CPU may have gone idle meanwhile. What that wakeup costs depends
on the kernel's idle driver. A VM guest whose idle vCPUs halt at once (the
`haltpoll` driver with `guest_halt_poll_ns` 0) is woken through its host,
tens of microseconds each time; one that polls a while before halting
answered single calls 2-3x faster on the machine of docs/benchmarks.md
(section "Where a single call's time goes"). Every result carries this, so
that runs on differently set machines are not compared as like with like.
"""

from __future__ import annotations

import os
from typing import Optional


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def describe() -> dict:
    """Cores, the cpuidle driver and governor, and the haltpoll guest's
    polling bound (None where the machine has no such setting)."""
    idle = "/sys/devices/system/cpu/cpuidle"
    poll = _read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    return {
        "cores": os.cpu_count(),
        "cpuidle_driver": _read(f"{idle}/current_driver"),
        "cpuidle_governor": _read(f"{idle}/current_governor"),
        "guest_halt_poll_ns": int(poll) if poll and poll.isdigit() else None,
    }

"""``python -m tierpool._serve coordinator|worker ...``: the pool's server
roles, run from the native module (used by :func:`tierpool.local`)."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import List, Optional

from tierpool import _native


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tierpool._serve")
    sub = p.add_subparsers(dest="role", required=True)
    c = sub.add_parser("coordinator", help="run a coordinator")
    c.add_argument("--dir", required=True, help="state directory")
    c.add_argument("--listen", default="127.0.0.1:7700", help="address to listen on (port 0: any free port)")
    c.add_argument("--partitions", type=int, default=4096, help="partition count of a new pool")
    w = sub.add_parser("worker", help="run a worker")
    w.add_argument("--dir", required=True, help="state directory")
    w.add_argument("--coordinator", required=True, help="coordinator address host:port")
    w.add_argument("--listen", default="127.0.0.1:0", help="address to listen on (port 0: any free port)")
    w.add_argument("--mem", default="256MiB", help="MEM budget, e.g. 256MiB")
    w.add_argument("--disk", default="1GiB", help="DISK budget, e.g. 1GiB")
    w.add_argument("--host", default=socket.gethostname(), help="host label for placement")
    w.add_argument("--rack", default="default", help="rack label for placement")
    for sp in (c, w):
        sp.add_argument("--watch-parent", action="store_true", help="stop when the starting process exits")
    a = p.parse_args(argv)
    try:
        if a.role == "coordinator":
            _native.serve_coordinator(a.dir, a.listen, a.partitions, a.watch_parent)
        else:
            _native.serve_worker(a.dir, a.coordinator, a.listen, a.mem, a.disk, a.host, a.rack, a.watch_parent)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

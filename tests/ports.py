"""Free TCP ports for the servers the tests start, taken outside the kernel's ephemeral range.

A port found by binding to port 0 is an ephemeral port: between the moment it is found and the
moment the server binds it, the kernel may hand the same port to any client connection or to a
double that binds port 0 (seen in CI: a gunicorn refused with "Address already in use"). Ports
below the ephemeral range are never handed out that way, so only another test picking the same
random port could take one, and the bind check below sees that.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000


def _ephemeral_low() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, which the kernel does not give to clients."""
    high = _ephemeral_low() - 1
    for _ in range(200):
        port = random.randint(_LOWEST, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {_LOWEST} and {high}")

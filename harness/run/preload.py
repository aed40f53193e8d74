"""What the workers' forkserver imports once, so that every worker forks with it (workers.py).

Imported in the server, before any worker redirects its output to its log: the imports' own
chatter (torchao's "Failed to load ...", torch's deprecation lines) would land on the user's
terminal, so it goes to /dev/null for the duration. ``preload_lowering`` adds the lowering
stack, for a pool that lowers (~6 s a lowering worker would otherwise pay itself).
"""

from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def quiet():
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


with quiet():
    import torch  # noqa: F401

    from harness.stages import cell  # noqa: F401

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

    from harness.runtimes import load as _runtime
    from harness.stages import cell  # noqa: F401

    # The runtime's extension, which every executing worker loads first: a wheel without the
    # bare ``_C`` module (1.3.1, 1.4.1) loads it through portable_lib, which imports
    # executorch.exir, seconds that every fresh process of a run's alone re-runs paid itself
    # (a warm 1.3.1 leg's ~450 of them ran at 0.6 a second instead of 2.6)
    try:
        _runtime.pybindings()
    except ImportError:  # no ExecuTorch runtime here: a worker says so itself
        pass

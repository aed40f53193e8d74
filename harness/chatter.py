"""What lowering says that is not the user's business: deprecation notices and advice from the
stack under test (torch, torchao, executorch; pytree's FutureWarning surfaces in copyreg, the
wheel's resource reads in importlib.resources) -- e.g. torch's "padding='same' with even kernel
lengths ..." for the odd convolutions the harness builds on purpose. Everything else, a user's
warning or our own, shows: the command line, the workers (their logs), a bisect step and the
test session all hide exactly this and nothing more."""

from __future__ import annotations

import warnings

NOISY_MODULES = r"(torch|torchao|executorch|copyreg|importlib\.resources)(\.|$)"
NOISY_CATEGORIES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, UserWarning)


def hide_lowering_chatter() -> None:
    for category in NOISY_CATEGORIES:
        warnings.filterwarnings("ignore", category=category, module=NOISY_MODULES)

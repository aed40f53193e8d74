"""nox sessions. They reuse the current interpreter's packages (torch/executorch are large and
must be the pinned CPU builds): run with ``nox --no-venv`` or let each session install them."""

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["tests"]


@nox.session
def tests(session):
    """The default, CI-sized test run (fast Hypothesis profile)."""
    session.env["HYPOTHESIS_PROFILE"] = "ci"
    session.run("python", "-m", "pytest", "-n", "auto", *session.posargs)


@nox.session
def matrix(session):
    """A small matrix run on both backends, stock and fixed."""
    out = session.posargs[0] if session.posargs else "runs/matrix"
    session.run("python", "-m", "harness", "run", "--out", out, "--fixes", "all", "--overwrite")

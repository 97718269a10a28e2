"""Session-based capacity planning (003 §3): ``sojourn plan``.

:mod:`sojourn.plan.model` holds the pure computation (traffic conformation
inequality, eqs. 1-3, and session generation rates, eq. 4);
:mod:`sojourn.plan.spec` reads plan files; :mod:`sojourn.plan.cli` is the command.
"""

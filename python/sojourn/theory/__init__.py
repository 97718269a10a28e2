"""Queueing theory and simulation references for sojourn.

* :mod:`sojourn.theory.formulas`: M/G/1 closed forms (SRPT per size, 004 §6.1; PS;
  FCFS Pollaczek-Khinchine) over the size models used by the papers;
* :mod:`sojourn.theory.bounds`: :func:`~sojourn.theory.bounds.ideal`, ideal PS and SRPT
  on a run's own arrivals (``sojourn-engine sim``), for reference lines in reports;
* :mod:`sojourn.theory.figures`: 004 Figs. 7-8 and the 000 §6 transient study;
* :mod:`sojourn.theory.cli`: the ``sojourn theory`` command.
"""

"""Checks that the ALFWorld engines agree, byte for byte; nothing here is used at play time.

* :mod:`.diff` — :func:`~.diff.first_difference` and :class:`~.diff.Mismatch`, the one comparison
  of two engine states that every check below uses;
* :mod:`.golden` — replay of the golden reference traces through any engine;
* :mod:`.fuzz` — live differential fuzzing of the compiled engine against the reference, with
  :mod:`.missions` (directed command chains) choosing the commands;
* :mod:`.refcache` — output-preserving speed-ups and rule-coverage instrumentation of the
  reference engine, and :mod:`.coverage` — which grammar branches a run exercised.

This package depends on :mod:`sapo_gym.alfworld.engines`, never the other way round. The full run
is ``benchmarks/alfworld_fuzz.py``; see docs/alfworld_engine.md.
"""

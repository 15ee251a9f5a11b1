"""What ``revseq probe`` runs: a backend probed for what it runs exactly, its profile written.

Probes (:mod:`revseq.probe.backend`) run small models on an installed backend and
compare each bit for bit with the truth (``_traces.py`` makes the op probes' models of
the forms as traced, ``_models.py`` builds the others, ``_runs.py`` runs them,
``_op_runs.py`` decides each op from the forms' runs); the
forms that ran exactly are timed by :mod:`revseq.measure`, and the profile the planner
reads is written (``profile_file.py``). Everything here imports the
core (``revseq.ops``, ``revseq.passes``, the check, the adapters); the core never
imports this package.
"""

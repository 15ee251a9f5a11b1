"""What ``revseq probe`` runs: a backend probed, its profile written.

Probes (:mod:`revseq.measure.probe`) run small models on an installed backend; the forms
that ran exactly are timed against the backend's copy floor (``costs.py``,
``layouts.py``, ``floor.py``), and the profile the planner reads is written
(``profile_file.py``). The pages under ``docs/`` are written by ``bench/`` in a
checkout, which builds on this package. Everything here imports the core
(``revseq.ops``, ``revseq.passes``, the check, the adapters); the core never imports
this package.
"""

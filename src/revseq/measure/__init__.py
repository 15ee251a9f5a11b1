"""The instruments: what revseq measures on backends, and the data and pages it writes.

Probes (:mod:`revseq.measure.probe`) run small models on an installed backend and write
its profile, the data the planner reads; the benchmark (``python -m
revseq.measure.bench``), the backend matrix and the sweeps time and check revseq's
output on the backends and write the pages under ``docs/``. Everything here imports the
core (``revseq.ops``, ``revseq.passes``, the check, the adapters); the core never
imports this package.
"""

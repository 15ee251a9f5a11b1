"""Timing: a backend's forms and index layouts against its copy floor.

The probe (:mod:`revseq.probe`) times the forms that ran exactly (``costs.py``) and its
own output in both index layouts (``layouts.py``) and one node of index arithmetic
(``node_cost.py``), each as a ratio to copying the data
on the same backend (``floor.py``), measured side by side over the cases
(``_cases.py``, ``_timing.py``). The pages under ``docs/`` are written by ``bench/``
in a checkout, which builds on this package. The core never imports it.
"""

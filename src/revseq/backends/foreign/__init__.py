"""Runners that live in another Python environment, with the server that hosts them.

Some runtimes pin what revseq's own environment cannot hold (RKNN's toolkit wants
numpy 1 and onnx 1.18, x2paddle onnx 1.17). Their runners are plain scripts run by that
environment's interpreter through :mod:`serve`: they import nothing from revseq, and
nothing in revseq imports them.
"""

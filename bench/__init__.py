"""The page writers: revseq timed and checked on backends, written under ``docs/``.

Run from a checkout (``python -m bench.bench --write docs/benchmark.md``, ``python -m
bench.matrix``, ``bench.sweep``, ``bench.choices``, ``bench.share``): not installed with
revseq. They build on what ``revseq probe`` uses (:mod:`revseq.measure`: the cases, the
timing, the copy floor); the package never imports them.
"""

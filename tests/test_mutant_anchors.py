"""Each hand-made mutant (``tests/mutants.py``) names code that is there, once.

A refactoring moves the lines a mutant changes; its run then stops at that mutant. This
says which, in the test run, before anyone waits for the mutants.
"""

from __future__ import annotations

import pathlib

import mutants
import pytest


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m.name)
def test_the_mutant_s_anchor_occurs_once(mutant):
    source = pathlib.Path(mutants.ROOT, mutant.path).read_text(encoding="utf-8")
    assert source.count(mutant.old) == 1
    path, _, test = mutant.aimed.partition("::")
    aimed = pathlib.Path(mutants.ROOT, path)
    assert aimed.is_file()
    assert f"def {test.split('[')[0]}(" in aimed.read_text(encoding="utf-8")

"""The bundled sample models (``revseq demo`` runs on them); ``build.py`` regenerates them."""

from __future__ import annotations

__all__ = ["FOLDER"]

import pathlib

FOLDER = pathlib.Path(__file__).parent
"""The folder holding the bundled ``.onnx`` files."""

"""``python -m revseq``: the command line."""

from revseq.cli import main

raise SystemExit(main())

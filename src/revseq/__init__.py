"""revseq."""

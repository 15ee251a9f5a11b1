"""ExecuTorch with its portable kernels alone: no delegate (:mod:`.executorch`)."""

from __future__ import annotations

import functools

from revseq.backends import executorch

DISTRIBUTION = executorch.DISTRIBUTION
EXTRA = executorch.EXTRA
IMPORTS = executorch.IMPORTS

prepare = functools.partial(executorch.prepare, delegate=False)

"""``python -m fastdllm_core.cli ...`` (e.g. under ``torchrun`` / ``accelerate launch``): the ``fastdllm`` command."""
import sys

from . import main

sys.exit(main())

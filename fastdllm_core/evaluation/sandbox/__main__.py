"""``python -m fastdllm_core.evaluation.sandbox``: what this machine's sandbox enforces (:func:`.probe.probe`, as
JSON)."""
import json

from .probe import probe

if __name__ == "__main__":
    print(json.dumps(probe(), indent=2))

"""Lamarck: a self-evolving multi-agent platform."""

import os as _os

# Lamarck never reaches a model hub or a price list on the internet: weights ship in packages,
# and litellm's bundled cost map is used. Set before any of those libraries is imported.
for _name, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    _os.environ.setdefault(_name, _value)

__version__ = "0.1.0"

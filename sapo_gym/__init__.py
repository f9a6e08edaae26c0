"""sapo_gym: standardized multi-turn text environments for LLM agents.

``import sapo_gym`` registers the ids (``sapo/ALFWorld-v0``, ``sapo/WebShop-v0``,
``sapo/WebShop-Browser-v0``, ``sapo/Vault-v0``) by string entry point; no backend, torch or flask
is imported until an env is made.
"""

from sapo_gym.core import PRIVILEGED_INFO_KEYS, TextEnv, Turn, public_info
from sapo_gym.parsing import PROTOCOLS, ParsedAction, parse_action
from sapo_gym.registration import ENVS, register_all
from sapo_gym.vector import make_vec

__version__ = "0.1.0"
__all__ = [
    "TextEnv",
    "Turn",
    "PRIVILEGED_INFO_KEYS",
    "public_info",
    "ParsedAction",
    "parse_action",
    "PROTOCOLS",
    "ENVS",
    "make_vec",
    "__version__",
]

register_all()

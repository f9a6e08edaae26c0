"""The verifiers environment id ``sapo-gym-verifiers``: verifiers 0.4 loads a taskset, env and harness by id from an
installed top-level package's ``__all__``. The adapter itself is :mod:`sapo_gym.integrations.verifiers`."""

from sapo_gym.integrations.verifiers import SapoEnv, SapoHarness, SapoTaskset

__all__ = ["SapoTaskset", "SapoEnv", "SapoHarness"]

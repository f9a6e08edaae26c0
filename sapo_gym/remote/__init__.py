"""Every registered env over the network, on OpenEnv (``pip install "sapo-gym[serve]"``; see docs/remote.md).

* :mod:`sapo_gym.remote.server`: ``sapo-gym env serve ENV_ID`` — one env instance per session, over
  OpenEnv's WebSocket protocol and HTTP sessions;
* :mod:`sapo_gym.remote.client`: :class:`~sapo_gym.remote.client.SapoEnvClient` (an OpenEnv
  ``EnvClient``) and :class:`~sapo_gym.remote.client.RemoteEnv`, registered as ``sapo/Remote-v0``;
* :mod:`sapo_gym.remote.wire_types`: the typed action, observation and state.

Only these modules import ``openenv`` (and FastAPI, uvicorn, websockets); ``import sapo_gym`` and this
package's ``__init__`` import none of them.
"""

"""uvicorn's app factory: the app of the config in the environment, with the process's start-up heap frozen."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("openenv.core.env_server")

from sapo_gym.remote.server import CONFIG_VARIABLE, ServeConfig, app_from_environment, config_json  # noqa: E402


def test_the_factory_serves_the_configured_env_and_freezes_what_it_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_VARIABLE, config_json(ServeConfig("sapo/Vault-v0", max_sessions=3)))
    gc.unfreeze()
    try:
        app = app_from_environment()
        server = app.state.env_server
        assert server._max_concurrent_envs == 3
        # the app and its server are long-lived: out of the cycle collector's passes from now on
        assert gc.get_freeze_count() > 0
        assert all(o is not server for o in gc.get_objects())  # get_objects lists the collector's generations only
    finally:
        gc.unfreeze()

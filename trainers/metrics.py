"""Per-iteration metrics: what a rollout measured (:func:`rollout_metrics`), and where rows go: a JSONL
file (always), TensorBoard (optional)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MetricsLogger", "read_metrics", "rollout_metrics"]


def rollout_metrics(rollout: Any, exp: Any, constrained: bool) -> dict[str, float]:
    """``rollout/*``: episode outcomes of a :class:`~trainers.rollout.Rollout` and the turn statistics
    of its :class:`~trainers.experience.Experience` (``constrained``: also count constraint fallbacks)."""
    eps, outputs = rollout.episodes, [t.output for t in rollout.turns]
    fallbacks = {"rollout/constraint_fallbacks": sum(bool(getattr(o, "constraint_fallback", False)) for o in outputs)}
    return {
        **(fallbacks if constrained else {}),
        "rollout/success": float(np.mean([e.won for e in eps])),
        "rollout/score": float(np.mean([e.score for e in eps])),
        "rollout/return": float(np.mean([e.episode_return for e in eps])),
        "rollout/episode_length": float(np.mean([e.length for e in eps])),
        "rollout/truncated_episodes": float(np.mean([e.truncated for e in eps])),
        "rollout/invalid_rate": float(exp.invalid.float().mean()),
        "rollout/turns": len(exp),
        "rollout/response_tokens": float(exp.response_lengths.float().mean()),
        "rollout/empty_responses": int((exp.response_lengths == 0).sum()),
        "rollout/response_truncated": sum(bool(getattr(o, "truncated", False)) for o in outputs),
        "rollout/prompt_truncated": sum(bool(getattr(o, "prompt_truncated", False)) for o in outputs),
    }


class MetricsLogger:
    """Appends one JSON object per iteration to ``<out_dir>/metrics.jsonl``.

    On resume the file is cut back to the iterations before ``start_iteration``, so a run that
    died after its last checkpoint does not leave duplicate rows.
    """

    def __init__(self, out_dir: str | Path, start_iteration: int = 0, tensorboard: bool = False):
        self.path = Path(out_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = [r for r in read_metrics(self.path) if r.get("iteration", 0) < start_iteration]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ValueError("--tensorboard needs the tensorboard package (pip install tensorboard)") from exc
            self._tb = SummaryWriter(str(Path(out_dir) / "tensorboard"))

    def log(self, row: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        with self.path.open("a") as fh:
            fh.write(json.dumps(clean) + "\n")
        if self._tb is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and key != "iteration":
                    self._tb.add_scalar(key, value, row["iteration"])

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl file (empty when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

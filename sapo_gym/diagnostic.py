"""``sapo/Vault-v0``: a tiny multi-turn text task with a sparse terminal reward.

For fast tests of agents and trainers (no backend to install). The agent must press
``code_length`` buttons in the right order; the panel shows the colour of the next button when
``show_hints`` is on (the default). A wrong button sounds the alarm (terminal failure); the
full code opens the vault (``success_reward``). A uniformly random agent succeeds with
probability ``num_buttons ** -code_length``. The ``look`` action is always admissible and does
nothing, so episodes can also end by truncation at the horizon.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sapo_gym.core import TaskInfo, TextEnv, Turn

__all__ = ["VaultEnv"]

COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple")
SPLITS = ("train", "test")
"""The split names (16 codes each by default, drawn from different seeds)."""


class VaultEnv(TextEnv):
    """Press the vault's buttons in the right order (see the module docstring)."""

    env_name = "Vault"

    def __init__(
        self,
        *,
        code_length: int = 2,
        num_buttons: int = 3,
        num_tasks: int = 16,
        show_hints: bool = True,
        success_reward: float = 10.0,
        task_seed: int = 0,
        split: str = "train",
        protocol: str = "verl-agent-v1",
        render_mode: str | None = None,
    ):
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid choices: {sorted(SPLITS)}")
        if not 1 <= num_buttons <= len(COLOURS):
            raise ValueError(f"num_buttons must be in 1..{len(COLOURS)}")
        if code_length < 1 or num_tasks < 1:
            raise ValueError("code_length and num_tasks must be >= 1")
        super().__init__(protocol=protocol, split=split, render_mode=render_mode)
        self.code_length, self.show_hints, self.success_reward = code_length, show_hints, success_reward
        self.buttons = list(COLOURS[:num_buttons])
        rng = np.random.default_rng([task_seed, 0 if split == "train" else 1])
        self.codes = [
            tuple(self.buttons[i] for i in rng.integers(num_buttons, size=code_length)) for _ in range(num_tasks)
        ]
        self._ids = [f"vault-{split}-{i:03d}" for i in range(num_tasks)]
        self._code: tuple[str, ...] = ()
        self._pressed = 0
        self._alarm = False

    @property
    def task_ids(self) -> Sequence[str]:
        return self._ids

    def _dataset_name(self) -> str:
        return "generated"

    def _actions(self) -> list[str]:
        return ["look"] + [f"press {b}" for b in self.buttons]

    def _panel(self) -> str:
        if not self.show_hints:
            return "The panel is dark."
        return f"The panel glows {self._code[self._pressed]}."

    def _load_task(self, index: int) -> tuple[TaskInfo, Turn]:
        self._code, self._pressed, self._alarm = self.codes[index], 0, False
        task = f"open the vault by pressing its {self.code_length} buttons in order"
        info = TaskInfo(task=task, task_id=self._ids[index], task_type=f"code{self.code_length}", dataset="generated")
        obs = f"You stand before a vault with {len(self.buttons)} buttons. {self._panel()}\n\nYour task is to: {task}."
        return info, Turn(obs, self._actions())

    def _backend_step(self, action: str) -> Turn:
        # never called once the vault is open or the alarm rings: TextEnv.step freezes a terminated episode
        if action == "look":
            return Turn(f"You see the vault. {self._panel()}", self._actions())
        if not action.startswith("press ") or action[6:] not in self.buttons:
            return Turn("Nothing happens.", self._actions())
        if action[6:] != self._code[self._pressed]:
            self._alarm = True
            return Turn("Wrong button. The alarm sounds.", self._actions(), lost=True)
        self._pressed += 1
        if self._pressed == self.code_length:
            return Turn("Click. The vault opens.", self._actions(), won=True, score=1.0, reward=self.success_reward)
        return Turn(f"Click. {self._panel()}", self._actions())

    def expert_action(self) -> str | None:
        if self._pressed >= self.code_length or self._alarm:
            return None
        return f"press {self._code[self._pressed]}"

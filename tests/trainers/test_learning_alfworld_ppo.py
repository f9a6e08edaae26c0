"""PPO lifts success on six ALFWorld-Mini games from the shared warm start (slow).

The games, warm start and settings are ``tests.support.learning``'s (:func:`~tests.support.learning.alfworld_config`,
:func:`~tests.support.learning.build_alfworld_start`): six generated train games of the heat, clean and cool
categories at horizon 25; a clone of the walkthrough expert on 24 other games, which leaves these six at 10–15 %;
then ``ITERATIONS`` iterations of 8 episodes with the CPU default's settings (the random-init tiny Qwen2 at
hidden 128, the plain prompt, 24 response tokens, admissible-action constrained decoding, lr 3e-4, KL 0.01). The
assertion is :func:`~tests.support.learning.assert_rl_lifts`'s: success on the same 96 episodes before and after, a
one-sided two-proportion z above 1.645.

Measured (one-sided z; training seeds 0–2 each from its own warm start, a stand-in for the sampled tokens another
CPU's kernels would change; without draft tokens, whose other draws of the same distribution are one more such
stand-in): after 10 / 15 / 20 iterations, seed 0 2.32 / 4.26 / 5.84, seed 1 −1.16 / 1.85 / 4.49, seed 2 0.37 /
1.56 / 4.05. PPO first loses success while its random-init critic learns (1 % after 5 iterations on seed 0), so it
gets 20. With the test's settings: 13.5 % → 39.6 %, z = 4.09. The weakest, 4.05, is 2.4 above the threshold: about
15 of the 96 episodes.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tests.support.learning import alfworld_config, alfworld_start, assert_rl_lifts  # noqa: E402

pytestmark = pytest.mark.slow

ITERATIONS = 20


def test_ppo_lifts_success_on_alfworld_games(tmp_path, tmp_path_factory):
    assert_rl_lifts(alfworld_config("ppo", ITERATIONS, tmp_path), alfworld_start(tmp_path_factory), ITERATIONS)

"""Test helper: mid-game Lost Cities states reached by two random bots."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lcjax.env.bots import make_bot


def random_midgame_states(game, count: int, low: int, high: int, seed: int = 0):
    """`count` states (leaves [count, ...]) of games between two random bots, each stopped
    after its own number of decisions in [low, high) (or at its end, if sooner)."""
    bot = make_bot("random", game)

    def play(key):
        state = game.init(key)

        def body(t, state):
            next_state = game.step(state, bot(jax.random.fold_in(key, t), state))
            return jax.tree.map(lambda a, b: jnp.where(state.terminated, a, b), state, next_state)

        steps = jax.random.randint(jax.random.fold_in(key, 999), (), low, high)
        return jax.lax.fori_loop(0, steps, body, state)

    return jax.jit(jax.vmap(play))(jax.random.split(jax.random.key(seed), count))

"""Learning diagnostics for Lost Cities: do the advantage networks rank actions right?

Bot matches say how strong a policy is, slowly and noisily. This module gives a direct,
cheaper signal about the advantage networks: a fixed set of probe states, built once per run
from the run seed, each with a reference value for every legal action, and per evaluation
how well each advantage network's outputs agree with those references.

The probe states (`build_probe_set`) are play-phase positions of games between
`safe_heuristic` and `noisy_safe` (seats drawn at random), stopped at a uniformly drawn
turn. The reference value of action a in state s is the mean over R re-deals of the cards
the acting player has not seen (`lcjax.env.redeal.redeal_unseen`) of the acting player's
return (own score minus the opponent's) after playing a, both players then continuing with
`safe_heuristic` to the end. All actions of one re-deal share the deck order and the
continuation keys (common random numbers), so the differences between actions are far less
noisy than the values. The reference regret is the value minus its mean over legal actions.

What the reference is, and is not: the values of a fixed heuristic continuation, not of the
agent's own strategy or of an equilibrium, and they average over the unseen cards uniformly
(ignoring what the opponent's play reveals). So a perfect Deep CFR agent need not match them.
They are still a useful signal: early in training, when the networks are mostly noise, the
ranking "keep the good card, discard the useless one, do not open a hopeless expedition"
is shared by any sensible continuation, so a rising correlation means the networks learn the
game's obvious structure, and a correlation stuck near 0 means the regret targets carry no
learnable signal (too noisy, or too few samples).

Per evaluation (`probe_metrics`), for each player p's advantage network on the probe states
where p acts (and for the average policy's probabilities, `diag/average/...`, on all states):
`diag/advantage_<p>/correlation`, the mean over states of the Pearson
correlation (over legal actions) between the network's outputs and the reference values
(states with a constant output or reference are left out), and
`diag/advantage_<p>/argmax_agreement`, the fraction of states whose best action agrees.

The references are estimates, so neither metric can reach 1. Measured on 64 states of the
classic rules: two independent 32-re-deal references correlate at 0.79 on average and
agree on the best action in only 39% of the states (many actions are nearly tied); a
32-re-deal reference correlates at 0.85 with a 128-re-deal one. So read the metrics as a
trend over training, not against 1. Building 64 states x 32 re-deals takes ~6 s on 2 CPU
cores, compilation included (128 re-deals: ~20 s).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lcjax.env.lost_cities import PHASE_PLAY, LostCities, State
from lcjax.env.redeal import redeal_unseen
from lcjax.env.registry import info_of

Array = jax.Array

# The bots of the probe games and of the continuation.
SAMPLER_BOTS = ("safe_heuristic", "noisy_safe")
CONTINUATION_BOT = "safe_heuristic"


class ProbeSet(NamedTuple):
    """Fixed probe states with reference values. S states, A actions, D observation size.

    Attributes:
      states: State batched over S (play phase, not terminated).
      players: int32[S], the acting player of each state.
      observations: float32[S, D], each state observed by its acting player.
      masks: bool[S, A], the legal actions.
      values: float32[S, A], reference action values (0 on illegal actions).
      regrets: float32[S, A], values minus their mean over legal actions (0 on illegal).
    """

    states: State
    players: Array
    observations: Array
    masks: Array
    values: Array
    regrets: Array


def has_diagnostics(game) -> bool:
    """Whether `game` has probe diagnostics: Lost Cities-like games with bots (for Kuhn and
    Leduc the exact exploitability says more)."""
    info = info_of(game)
    return isinstance(game, LostCities) and all(b in info.bot_names for b in (*SAMPLER_BOTS, CONTINUATION_BOT))


# ---------------------------------------------------------------------------- sampling states
def _sample_states(game: LostCities, key: Array, count: int, max_turn: int) -> State:
    """`count` games of safe_heuristic against noisy_safe (random seats), each stopped at the
    start of turn k ~ U{0..max_turn-1} (a play-phase decision), or at its end if sooner."""
    info = info_of(game)
    bots = [info.make_bot(name, game) for name in SAMPLER_BOTS]
    k_deal, k_seat, k_turn, k_play = jax.random.split(key, 4)
    states = jax.vmap(game.init)(jax.random.split(k_deal, count))
    safe_seat = jax.random.bernoulli(k_seat, 0.5, (count,)).astype(jnp.int32)
    stop = jax.random.randint(k_turn, (count,), 0, max_turn)
    keys = jax.random.split(k_play, count)

    def decide(state, seat, key, t):
        key = jax.random.fold_in(key, t)
        a_safe, a_noisy = bots[0](key, state), bots[1](key, state)
        return jnp.where(state.current_player == seat, a_safe, a_noisy).astype(jnp.int32)

    def running(states):
        return ~states.terminated & ~((states.turn >= stop) & (states.phase == PHASE_PLAY))

    def body(carry):
        states, t = carry
        actions = jax.vmap(decide, in_axes=(0, 0, 0, None))(states, safe_seat, keys, t)
        stepped = jax.vmap(game.step)(states, actions)
        live = running(states)
        states = jax.tree.map(lambda new, old: jnp.where(_bcast(live, new), new, old), stepped, states)
        return states, t + 1

    states, _ = jax.lax.while_loop(lambda c: jnp.any(running(c[0])), body, (states, jnp.int32(0)))
    return states


def _bcast(flag: Array, like: Array) -> Array:
    return flag.reshape(flag.shape + (1,) * (like.ndim - flag.ndim))


# ---------------------------------------------------------------------------- reference values
def _rollout_values(game: LostCities, states: State, players: Array, key: Array, redeals: int) -> Array:
    """float32[S, P]: mean over `redeals` re-deals of the acting player's return after each of
    the P = 2H play/discard actions, then safe_heuristic for both players to the end.

    One while_loop advances all S x R x P lanes together; illegal actions leave the state
    unchanged (their values are masked by the caller)."""
    bot = info_of(game).make_bot(CONTINUATION_BOT, game)
    s, p = players.shape[0], 2 * game.rules.hand_size
    keys = jax.random.split(key, s * redeals).reshape(s, redeals)

    def redeal_row(state, player, row_keys):
        return jax.vmap(redeal_unseen, in_axes=(None, None, None, 0))(game, state, player, row_keys)

    dealt = jax.vmap(redeal_row)(states, players, keys)  # State [S, R]
    lanes = jax.tree.map(lambda x: jnp.broadcast_to(x[:, :, None], x.shape[:2] + (p,) + x.shape[2:]), dealt)
    actions = jnp.broadcast_to(jnp.arange(p, dtype=jnp.int32), (s, redeals, p))
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[3:]), lanes)
    flat = jax.vmap(game.step)(flat, actions.reshape(-1))
    # Common random numbers: every action of one (state, re-deal) continues with one key.
    lane_keys = jnp.broadcast_to(keys[:, :, None], (s, redeals, p)).reshape(-1)
    max_steps = 2 * game.rules.max_turns + 2

    def body(carry):
        states, t = carry
        acts = jax.vmap(lambda k, st: bot(jax.random.fold_in(k, t), st))(lane_keys, states)
        stepped = jax.vmap(game.step)(states, acts)
        return stepped, t + 1

    def cond(carry):
        return jnp.any(~carry[0].terminated) & (carry[1] < max_steps)

    final, _ = jax.lax.while_loop(cond, body, (flat, jnp.int32(0)))
    returns = jax.vmap(game.returns)(final).reshape(s, redeals, p, 2)
    own = jnp.where(players[:, None, None] == 0, returns[..., 0], returns[..., 1])
    return own.mean(1)


@functools.partial(jax.jit, static_argnums=(0, 3))
def reference_values(game: LostCities, states: State, key: Array, redeals: int) -> tuple[Array, Array]:
    """(values f32[S, A], regrets f32[S, A]) of play-phase `states` (batched over S): the
    acting player's mean return over `redeals` re-deals after each legal action, both players
    then playing safe_heuristic; regrets are values minus their mean over legal actions.
    Both are 0 on illegal actions."""
    players = states.current_player.astype(jnp.int32)
    masks = jax.vmap(game.legal_action_mask)(states)
    play_values = _rollout_values(game, states, players, key, redeals)
    values = jnp.zeros(masks.shape, jnp.float32).at[:, : play_values.shape[1]].set(play_values)
    values = jnp.where(masks, values, 0.0)
    mean = values.sum(-1, keepdims=True) / jnp.maximum(masks.sum(-1, keepdims=True), 1)
    return values, jnp.where(masks, values - mean, 0.0)


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def _build(game: LostCities, key: Array, count: int, redeals: int) -> ProbeSet:
    k_states, k_values = jax.random.split(key)
    states = _sample_states(game, k_states, count, max_turn=36)
    players = states.current_player.astype(jnp.int32)
    masks = jax.vmap(game.legal_action_mask)(states)
    observations = jax.vmap(game.observe)(states, players)
    values, regrets = reference_values(game, states, k_values, redeals)
    return ProbeSet(states, players, observations, masks, values, regrets)


def build_probe_set(game: LostCities, key: Array, num_states: int = 64, redeals: int = 32) -> ProbeSet:
    """The probe states and their reference values (see the module docstring), one jitted call.

    States whose game ended before the drawn turn are dropped, so fewer than `num_states`
    may come back (twice as many games are sampled as needed, so rarely).
    """
    if not has_diagnostics(game):
        raise ValueError(f"{info_of(game).name} has no probe diagnostics (they need Lost Cities bots)")
    probes = jax.device_get(_build(game, key, 2 * int(num_states), int(redeals)))
    keep = np.flatnonzero(~np.asarray(probes.states.terminated) & (np.asarray(probes.states.phase) == PHASE_PLAY))
    keep = keep[: int(num_states)]
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[keep]), probes)


@functools.lru_cache(maxsize=8)
def run_probe_set(game: LostCities, seed: int, num_states: int, redeals: int) -> ProbeSet:
    """The probe set of a run with seed `seed`: built once, then shared (cached per process)."""
    return build_probe_set(game, jax.random.key(seed ^ 0xD1A6), num_states, redeals)


# ---------------------------------------------------------------------------- agreement
def masked_correlation(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float64[S]: the Pearson correlation of x[s] and y[s] over the actions where mask[s];
    NaN where fewer than 2 actions are legal or either side is constant there.

    Args: x, y: float[S, A]; mask: bool[S, A].
    """
    x, y, m = np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(mask, bool)
    n = m.sum(-1)
    safe_n = np.maximum(n, 1)
    xc = np.where(m, x - (np.where(m, x, 0).sum(-1) / safe_n)[:, None], 0.0)
    yc = np.where(m, y - (np.where(m, y, 0).sum(-1) / safe_n)[:, None], 0.0)
    sx, sy = np.sqrt((xc**2).sum(-1)), np.sqrt((yc**2).sum(-1))
    ok = (n >= 2) & (sx > 1e-12) & (sy > 1e-12)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, (xc * yc).sum(-1) / np.where(ok, sx * sy, 1.0), np.nan)


def argmax_agreement(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """bool[S]: whether the legal argmaxes of x[s] and y[s] are the same action."""
    m = np.asarray(mask, bool)
    return np.argmax(np.where(m, x, -np.inf), -1) == np.argmax(np.where(m, y, -np.inf), -1)


def agreement_metrics(predictions: np.ndarray, probes: ProbeSet, prefix: str, rows: np.ndarray) -> dict[str, float]:
    """`prefix/correlation` and `prefix/argmax_agreement` of predictions f32[S, A] against the
    reference values on the states selected by bool[S] `rows` (NaN when none qualifies)."""
    mask = np.asarray(probes.masks)[rows]
    pred, ref = np.asarray(predictions)[rows], np.asarray(probes.values)[rows]
    corr = masked_correlation(pred, ref, mask)
    agree = argmax_agreement(pred, ref, mask)
    return {
        f"{prefix}/correlation": float(np.nanmean(corr)) if np.isfinite(corr).any() else float("nan"),
        f"{prefix}/argmax_agreement": float(agree.mean()) if agree.size else float("nan"),
    }


def probe_metrics(solver, state, probes: ProbeSet) -> dict[str, float]:
    """`diag/advantage_<p>/{correlation,argmax_agreement}` of each player's advantage network
    on the probe states where p acts (the states its training data comes from), and
    `diag/average/...` of the average policy's probabilities on all of them."""
    players = np.asarray(probes.players)
    metrics: dict[str, float] = {}
    for p in (0, 1):
        outputs = solver.apply_fn(state.advantage_params[p], probes.observations)
        metrics.update(agreement_metrics(np.asarray(outputs), probes, f"diag/advantage_{p}", players == p))
    probs = solver.policy_fn(state, "average")(probes.observations, probes.masks, probes.players)
    metrics.update(agreement_metrics(np.asarray(probs), probes, "diag/average", np.ones(players.shape, bool)))
    return metrics


__all__ = [
    "CONTINUATION_BOT",
    "ProbeSet",
    "agreement_metrics",
    "argmax_agreement",
    "build_probe_set",
    "has_diagnostics",
    "masked_correlation",
    "probe_metrics",
    "reference_values",
    "run_probe_set",
]

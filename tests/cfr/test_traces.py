"""Hot functions trace once per configuration, checked with `chex.assert_max_traces`.

A solver binds its functions when it is built, so each test wraps the Python functions
behind the jitted phases (traversal, advantage and strategy training, reservoir add, the
policy read-offs) before `make_solver` builds a solver for a configuration no other test
uses, then runs every phase again: a second iteration, new parameters, and a second solver
asked for with an equal (game, config). A retrace raises inside the trace.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import pytest

from lcjax.cfr import policy
from lcjax.cfr import solver as solver_module
from lcjax.cfr import traversal as tr
from lcjax.cfr.solver import make_solver
from lcjax.config import small_game_config
from lcjax.env.kuhn import KuhnPoker
from lcjax.env.lost_cities import LostCities
from lcjax.evaluate import agent_act, evaluate_exploitability

# Tiny and unlike every other test's config, so that `make_solver` builds it here.
CONFIG = small_game_config(
    "kuhn",
    "external",
    **{
        "traversal.traversals_per_player": 8,
        "traversal.traversal_batch": 8,
        "network.hidden_size": 5,
        "network.num_layers": 1,
        "optimization.advantage_steps": 3,
        "optimization.advantage_batch": 8,
        "optimization.strategy_steps": 3,
        "optimization.strategy_batch": 8,
        "memory.advantage_capacity": 40,
        "memory.strategy_capacity": 40,
        "optimization.strategy_train_every": 1,
    },
)


@pytest.fixture
def traced_once(monkeypatch):
    """Wraps the phases' functions in `chex.assert_max_traces`: one trace per program."""
    chex.clear_trace_counter()
    # (module, name, programs built from it): train_steps and reservoir_add each serve an
    # advantage and a strategy program.
    for module, name, programs in ((tr, "external_sampling", 1), (solver_module, "train_steps", 2), (solver_module, "reservoir_add", 2)):
        monkeypatch.setattr(module, name, chex.assert_max_traces(getattr(module, name), n=programs))
    for name in ("average_policy", "current_policy"):
        make = getattr(policy, name)
        monkeypatch.setattr(solver_module, name, lambda apply_fn, make=make: chex.assert_max_traces(make(apply_fn), n=1))
    yield
    chex.clear_trace_counter()


def test_solver_phases_trace_once_per_config(traced_once):
    built = make_solver.cache_info().misses
    solver = make_solver(KuhnPoker(), CONFIG)
    assert make_solver.cache_info().misses == built + 1, "CONFIG must be new to this process"
    state = solver.init(jax.random.key(0))
    for _ in range(2):  # two iterations, each read off with new parameters
        state, metrics = solver.iteration(state)
        assert "loss/strategy" in metrics  # both training programs ran
        for kind in ("average", "current"):
            assert evaluate_exploitability(solver, state, policy=kind)["eval/exploitability"] >= 0
    # An equal (game, config) pair, built anew, gets the same solver: nothing traces again.
    again = make_solver(KuhnPoker(), dataclasses.replace(CONFIG))
    assert again is solver
    state, _ = again.iteration(state)
    evaluate_exploitability(again, state, policy="current")


def test_equal_configs_share_the_arena_act():
    """The arena compiles one match per act object: an equal (game, config) must give the
    same act, so evaluating a second solver reuses the first one's compiled match."""
    external = dataclasses.replace(CONFIG.traversal.external, max_strategy=3)
    config = dataclasses.replace(CONFIG, traversal=dataclasses.replace(CONFIG.traversal, external=external))
    for kind in ("average", "current"):
        act, _ = agent_act(make_solver(LostCities(), config), kind)
        again, _ = agent_act(make_solver(LostCities(), dataclasses.replace(config)), kind)
        assert again is act
    # A different config is a different solver, with its own act.
    assert agent_act(make_solver(LostCities(), CONFIG), "current")[0] is not act

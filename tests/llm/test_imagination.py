"""Imagination with the tiny grounded model: cached, batched, left-padded generation gives
what one uncached forward over the finished rollout predicts; the judge ends episodes."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.llm.grounded import ACTION, ACTION_SLOT, STATE_SLOT, build_grounded, encode_slots
from leap_kalm.llm.imagination import imagination_prompt, imagine
from leap_kalm.llm.models import load_model
from tests.llm.test_grounded import CONTINUOUS, DISCRETE

INSTRUCTIONS = ["push the red ball left", "move the blue ball behind the green ball, please"]


@pytest.fixture(scope="module", params=[DISCRETE, CONTINUOUS], ids=["discrete", "continuous"])
def grounded(request, tiny_model_dir):
    import torch

    lm, tokenizer = load_model(tiny_model_dir)
    torch.manual_seed(0)
    return build_grounded(lm, request.param).eval(), tokenizer


def _reference(model, tokenizer, instruction, rollout):
    """Action and next-state predictions of one uncached forward over the whole rollout."""
    import torch

    n = len(rollout.actions)
    text = imagination_prompt(instruction) + f"{ACTION}<state>" * n
    ids, kinds = encode_slots(tokenizer, text)
    kinds_t = torch.tensor([kinds])
    states = torch.zeros((1, len(ids), model.spec.obs_dim))
    states[0, kinds_t[0] == STATE_SLOT] = torch.tensor(rollout.states)
    if model.spec.action_kind == "discrete":
        actions = torch.zeros((1, len(ids)), dtype=torch.long)
        actions[0, kinds_t[0] == ACTION_SLOT] = torch.tensor(rollout.actions, dtype=torch.long)
    else:
        actions = torch.zeros((1, len(ids), model.spec.action_dim))
        actions[0, kinds_t[0] == ACTION_SLOT] = torch.tensor(rollout.actions, dtype=torch.float32)
    with torch.no_grad():
        hidden = model(
            input_ids=torch.tensor([ids]), slot_kinds=kinds_t, states=states, actions=actions
        )["hidden"][0]
        after_states = hidden[kinds_t[0] == STATE_SLOT][:-1]  # each predicts the next action
        after_actions = hidden[kinds_t[0] == ACTION_SLOT]  # each predicts the next state
        base = torch.tensor(rollout.states[:-1])  # the state shown before each action
        return model.action_head(after_states), model.predict_state(after_actions, base)


def test_cached_batched_imagination_matches_one_uncached_forward(grounded):
    import torch

    model, tokenizer = grounded
    starts = np.random.default_rng(0).normal(size=(2, model.spec.obs_dim)).astype(np.float32)
    rollouts = imagine(model, tokenizer, INSTRUCTIONS, starts, lambda i, s, n: False, max_steps=4)
    assert len(rollouts) == 2
    for instruction, start, rollout in zip(INSTRUCTIONS, starts, rollouts, strict=True):
        assert rollout.states.shape == (5, model.spec.obs_dim) and not rollout.ended
        np.testing.assert_allclose(rollout.states[0], start)
        action_pred, state_pred = _reference(model, tokenizer, instruction, rollout)
        if model.spec.action_kind == "discrete":
            assert rollout.actions.shape == (4,)
            assert action_pred.argmax(-1).tolist() == rollout.actions.tolist()
        else:
            assert rollout.actions.shape == (4, model.spec.action_dim)
            assert torch.allclose(action_pred, torch.tensor(rollout.actions), atol=1e-4)
        assert torch.allclose(state_pred, torch.tensor(rollout.states[1:]), atol=1e-4)


def test_the_judge_ends_each_episode_on_its_own_step(grounded):
    model, tokenizer = grounded
    starts = np.zeros((3, model.spec.obs_dim), dtype=np.float32)
    calls = []
    stop_after = {0: 1, 1: 3, 2: 99}

    def judge(i, state, next_state):
        calls.append(i)
        return calls.count(i) >= stop_after[i]

    rollouts = imagine(
        model, tokenizer, INSTRUCTIONS + ["keep still"], starts, judge, max_steps=5, batch_size=2
    )
    assert [len(r.actions) for r in rollouts] == [1, 3, 5]
    assert [r.ended for r in rollouts] == [True, True, False]
    assert [len(r.states) for r in rollouts] == [2, 4, 6]


def test_sampled_actions_are_seeded_and_mismatched_inputs_are_named(grounded):
    model, tokenizer = grounded
    starts = np.zeros((2, model.spec.obs_dim), dtype=np.float32)
    never = lambda i, s, n: False  # noqa: E731
    a = imagine(model, tokenizer, INSTRUCTIONS, starts, never, 3, temperature=1.0, seed=5)
    b = imagine(model, tokenizer, INSTRUCTIONS, starts, never, 3, temperature=1.0, seed=5)
    assert all(np.array_equal(x.actions, y.actions) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="2 instructions but 1 start states"):
        imagine(model, tokenizer, INSTRUCTIONS, starts[:1], never, 3)

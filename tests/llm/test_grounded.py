"""KALM's grounded LM on the tiny model: slots, embeddings, losses, save/load; the four
grounding tasks built from KALM-layout arrays."""

from __future__ import annotations

import numpy as np
import pytest

from leap_kalm.llm.grounded import (
    ACTION_SLOT,
    STATE_SLOT,
    TEXT_SLOT,
    GroundingSpec,
    build_grounded,
    collate_grounding,
    encode_slots,
    load_grounded,
    save_grounded,
    tokenize_record,
)
from leap_kalm.llm.grounding_tasks import (
    TASKS,
    GroundingTaskParams,
    episodes_of,
    grounding_records,
    split_episodes,
    task_record,
)
from leap_kalm.llm.models import load_model

DISCRETE = GroundingSpec(obs_dim=10, action_kind="discrete", action_dim=40)
CONTINUOUS = GroundingSpec(obs_dim=6, action_kind="continuous", action_dim=4)


def kalm_arrays(spec: GroundingSpec, n: int = 6, horizon: int = 5, seed: int = 0) -> dict:
    """A KALM-layout dataset: episode i has horizon - (i % 3) valid steps."""
    rng = np.random.default_rng(seed)
    masks = np.zeros((n, horizon), dtype=np.int32)
    for i in range(n):
        masks[i, : horizon - i % 3] = 1
    obs = rng.normal(size=(n, horizon, spec.obs_dim)).astype(np.float32) * masks[..., None]
    nxt = rng.normal(size=(n, horizon, spec.obs_dim)).astype(np.float32) * masks[..., None]
    if spec.action_kind == "discrete":
        actions = rng.integers(0, spec.action_dim, size=(n, horizon)).astype(np.int32) * masks
    else:
        actions = rng.uniform(-1, 1, size=(n, horizon, spec.action_dim)) * masks[..., None]
    instructions = np.array(
        [[f"push the red ball left {i}", f"move red left {i}"] for i in range(n)]
    )
    return {
        "observations": obs,
        "next_observations": nxt,
        "actions": actions,
        "masks": masks,
        "instructions": instructions,
    }


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(tiny_model_dir)


def _batch(tokenizer, spec, tasks=TASKS, seed=0):
    episodes = episodes_of(kalm_arrays(spec, seed=seed))
    rng = np.random.default_rng(seed)
    records = [task_record(task, episodes[k], rng) for k, task in enumerate(tasks)]
    rows = [tokenize_record(tokenizer, r) for r in records]
    return records, collate_grounding(rows, tokenizer.pad_token_id, spec)


# -- slots and records ----------------------------------------------------------------------


def test_placeholders_become_slots_and_the_text_around_them_is_tokenized_as_it_stands(tiny):
    _, tokenizer = tiny
    ids, kinds = encode_slots(tokenizer, "State: <state> Action: <action><state>")
    assert kinds.count(STATE_SLOT) == 2 and kinds.count(ACTION_SLOT) == 1
    assert [i for i, k in zip(ids, kinds, strict=True) if k != TEXT_SLOT] == [
        tokenizer.pad_token_id
    ] * 3
    text_ids = [i for i, k in zip(ids, kinds, strict=True) if k == TEXT_SLOT]
    expected = sum(
        (tokenizer(p, add_special_tokens=False)["input_ids"] for p in ("State: ", " Action: ")), []
    )
    assert text_ids == expected
    assert kinds[-2:] == [ACTION_SLOT, STATE_SLOT]


@pytest.mark.parametrize("spec", [DISCRETE, CONTINUOUS], ids=["discrete", "continuous"])
def test_episodes_and_the_four_tasks_from_kalm_arrays(spec):
    data = kalm_arrays(spec)
    episodes = episodes_of(data)
    assert [len(e.actions) for e in episodes] == [5, 4, 3, 5, 4, 3]
    assert episodes[1].states.shape == (5, spec.obs_dim)
    np.testing.assert_array_equal(episodes[1].states[-1], data["next_observations"][1, 3])
    rng = np.random.default_rng(0)
    rollout = task_record("rollout", episodes[0], rng)
    assert rollout["text"].count("<state>") == 6 and rollout["text"].count("<action>") == 5
    # every state and action a target but the first state, which imagination is given
    assert rollout["predict_states"][0] is False and all(rollout["predict_states"][1:])
    assert all(rollout["predict_actions"])
    assert rollout["text"].split("\n")[0].removeprefix("Task: ") in list(data["instructions"][0])
    dynamics = task_record("dynamics", episodes[2], rng)
    assert dynamics["predict_states"] == [False, True] and dynamics["predict_actions"] == [False]
    t = [k for k in range(3) if np.allclose(episodes[2].states[k], dynamics["states"][0])][0]
    np.testing.assert_allclose(dynamics["states"][1], episodes[2].states[t + 1])
    consequence = task_record("consequence", episodes[2], rng)
    np.testing.assert_allclose(consequence["states"][1], episodes[2].states[3])
    explanation = task_record("explanation", episodes[0], rng, max_steps=2)
    assert explanation["text"].count("<action>") == 2 and len(explanation["states"]) == 3
    assert not any(explanation["predict_states"]) and explanation["completion"].strip() in list(
        data["instructions"][0]
    )


def test_records_mix_the_tasks_as_asked_and_the_split_holds_out_a_tenth():
    episodes = episodes_of(kalm_arrays(DISCRETE, n=20))
    train, held = split_episodes(episodes, 0.1, seed=3)
    assert len(held) == 2 and len(train) == 18
    assert not {e.index for e in held} & {e.index for e in train}
    params = GroundingTaskParams.from_dict(
        {"per_episode": {"rollout": 1, "dynamics": 2, "consequence": 0.5, "explanation": 0}}
    )
    records = grounding_records(train, params)
    counts = {task: sum(r["task"] == task for r in records) for task in TASKS}
    assert counts["rollout"] == 18 and counts["dynamics"] == 36 and counts["explanation"] == 0
    assert 3 <= counts["consequence"] <= 15
    assert records == grounding_records(train, params)  # seeded
    with pytest.raises(ValueError, match=r"grounding tasks \['imitation'\] do not exist"):
        GroundingTaskParams.from_dict({"per_episode": {"imitation": 1}})


def test_a_record_whose_numbers_do_not_fill_its_slots_is_named(tiny):
    _, tokenizer = tiny
    record = task_record(
        "dynamics", episodes_of(kalm_arrays(DISCRETE))[0], np.random.default_rng(0)
    )
    record["states"] = record["states"][:1]
    with pytest.raises(
        ValueError, match=r"\(dynamics, episode 0\): 2 state and 1 action slots, but 1 states"
    ):
        tokenize_record(tokenizer, record)


# -- the model ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [DISCRETE, CONTINUOUS], ids=["discrete", "continuous"])
def test_forward_shapes_losses_and_gradients_reach_every_grounding_layer(tiny, spec):
    import torch

    lm, tokenizer = tiny
    torch.manual_seed(0)
    model = build_grounded(lm, spec)
    _, batch = _batch(tokenizer, spec)
    out = model(**batch)
    batch_size, length = batch["input_ids"].shape
    assert out["hidden"].shape == (batch_size, length, lm.config.hidden_size)
    for key in ("token_loss", "state_loss", "action_loss"):
        assert out[key].ndim == 0 and out[key].item() > 0, key
    expected = out["token_loss"] + 0.5 * out["state_loss"] + 0.5 * out["action_loss"]
    assert torch.allclose(out["loss"], expected)
    model.zero_grad()
    out["loss"].backward()
    for name, layer in model.grounding_layers().items():
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters()), name


def test_every_placeholder_is_replaced_by_its_state_or_action_embedding(tiny):
    import torch

    lm, tokenizer = tiny
    model = build_grounded(lm, DISCRETE)
    _, batch = _batch(tokenizer, DISCRETE)
    with torch.no_grad():
        embeds = model.embed(
            batch["input_ids"], batch["slot_kinds"], batch["states"], batch["actions"]
        )
        tokens = lm.get_input_embeddings()(batch["input_ids"])
    kinds = batch["slot_kinds"]
    state_at, action_at, text_at = kinds == STATE_SLOT, kinds == ACTION_SLOT, kinds == TEXT_SLOT
    with torch.no_grad():
        assert torch.allclose(embeds[state_at], model.state_encoder(batch["states"][state_at]))
        assert torch.allclose(embeds[action_at], model.action_encoder(batch["actions"][action_at]))
    assert torch.equal(embeds[text_at], tokens[text_at])
    assert not torch.isclose(embeds[state_at], tokens[state_at]).all(dim=-1).any()


def test_the_losses_follow_the_targets_only(tiny):
    """A state the record does not predict has no effect on the loss; one it predicts does."""
    import torch

    lm, tokenizer = tiny
    model = build_grounded(lm, DISCRETE)
    records, batch = _batch(tokenizer, DISCRETE, tasks=("dynamics",))
    with torch.no_grad():
        base = model(**batch)
        target = batch["states"].clone()
        last = (batch["slot_kinds"][0] == STATE_SLOT).nonzero().flatten()[-1]
        target[0, last] += 1.0
        moved = model(**{**batch, "states": target})
    assert moved["state_loss"] > base["state_loss"]
    assert torch.equal(moved["token_loss"], base["token_loss"])


def test_save_then_load_gives_identical_predictions(tiny, tmp_path):
    import torch

    lm, tokenizer = tiny
    torch.manual_seed(1)
    model = build_grounded(lm, CONTINUOUS).eval()
    _, batch = _batch(tokenizer, CONTINUOUS)
    save_grounded(model, tokenizer, tmp_path / "grounded")
    loaded, _ = load_grounded(tmp_path / "grounded")
    assert loaded.spec == CONTINUOUS
    with torch.no_grad():
        a, b = model(**batch), loaded(**batch)
    assert torch.allclose(a["hidden"], b["hidden"], atol=1e-5)
    assert torch.allclose(a["loss"], b["loss"], atol=1e-5)
    with pytest.raises(FileNotFoundError, match="not a grounded model directory"):
        load_grounded(tmp_path / "nothing")


def test_a_bad_spec_is_named():
    with pytest.raises(
        ValueError, match=r"action_kind must be one of \('discrete', 'continuous'\)"
    ):
        GroundingSpec(obs_dim=10, action_kind="categorical", action_dim=40)


def test_predicted_targets_are_what_the_state_loss_scores(tiny):
    import torch

    from leap_kalm.llm.grounded import predict_targets
    from leap_kalm.llm.grounding_tasks import dynamics_record

    lm, tokenizer = tiny
    torch.manual_seed(2)
    model = build_grounded(lm, DISCRETE).eval()
    episodes = episodes_of(kalm_arrays(DISCRETE))
    records = [dynamics_record(e, t) for e in episodes[:3] for t in range(len(e.actions))]
    predicted = predict_targets(model, tokenizer, records, batch_size=4)
    truth = np.array([r["states"][1] for r in records])
    assert predicted.shape == truth.shape == (len(records), 10)
    rows = [tokenize_record(tokenizer, r) for r in records]
    with torch.no_grad():
        loss = model(**collate_grounding(rows, tokenizer.pad_token_id, DISCRETE))["state_loss"]
    assert np.mean((predicted - truth) ** 2) == pytest.approx(loss.item(), rel=1e-4)


def test_residual_states_predict_the_change_from_the_latest_state_shown(tiny):
    """With the state head at zero, a residual model predicts "nothing changes" (each
    dynamics record's next state is its current one) and a plain one predicts zeros; the
    state loss then scores exactly that prediction."""
    import dataclasses

    import torch

    from leap_kalm.llm.grounded import latest_states, predict_targets
    from leap_kalm.llm.grounding_tasks import dynamics_record

    lm, tokenizer = tiny
    episodes = episodes_of(kalm_arrays(DISCRETE))
    records = [dynamics_record(e, t) for e in episodes[:2] for t in range(len(e.actions))]
    current = np.array([r["states"][0] for r in records])
    for residual in (True, False):
        model = build_grounded(lm, dataclasses.replace(DISCRETE, residual_states=residual)).eval()
        torch.nn.init.zeros_(model.state_head.weight)
        torch.nn.init.zeros_(model.state_head.bias)
        predicted = predict_targets(model, tokenizer, records, batch_size=3)
        expected = current if residual else np.zeros_like(current)
        np.testing.assert_allclose(predicted, expected, atol=1e-6)
        rows = [tokenize_record(tokenizer, r) for r in records]
        with torch.no_grad():
            loss = model(**collate_grounding(rows, tokenizer.pad_token_id, model.spec))
        truth = np.array([r["states"][1] for r in records])
        assert loss["state_loss"].item() == pytest.approx(
            np.mean((expected - truth) ** 2), rel=1e-4
        )
    kinds = torch.tensor([[TEXT_SLOT, STATE_SLOT, ACTION_SLOT, STATE_SLOT, TEXT_SLOT]])
    states = torch.arange(5, dtype=torch.float32).view(1, 5, 1).expand(1, 5, 2)
    assert latest_states(kinds, states)[0, :, 0].tolist() == [0.0, 1.0, 1.0, 3.0, 3.0]


def test_state_scale_sets_the_heads_unit_and_the_losss(tiny):
    """With ``state_scale`` the head's output is in those units (its change is scaled back
    before the residual is added) and the state loss is measured in them."""
    import dataclasses

    import torch

    from leap_kalm.llm.grounded import predict_targets
    from leap_kalm.llm.grounding_tasks import dynamics_record
    from leap_kalm.pipelines.ground_llm.nodes import change_scale

    lm, tokenizer = tiny
    data = kalm_arrays(DISCRETE)
    episodes = episodes_of(data)
    records = [dynamics_record(e, t) for e in episodes[:2] for t in range(len(e.actions))]
    scale = [2.0] * 5 + [0.5] * 5
    model = build_grounded(lm, dataclasses.replace(DISCRETE, state_scale=scale)).eval()
    torch.nn.init.zeros_(model.state_head.weight)
    torch.nn.init.ones_(model.state_head.bias)  # the head says "+1 unit" everywhere
    predicted = predict_targets(model, tokenizer, records, batch_size=4)
    current = np.array([r["states"][0] for r in records])
    np.testing.assert_allclose(predicted, current + np.array(scale), atol=1e-5)
    rows = [tokenize_record(tokenizer, r) for r in records]
    with torch.no_grad():
        loss = model(**collate_grounding(rows, tokenizer.pad_token_id, model.spec))["state_loss"]
    truth = np.array([r["states"][1] for r in records])
    expected = np.mean(((predicted - truth) / np.array(scale)) ** 2)
    assert loss.item() == pytest.approx(expected, rel=1e-4)
    # the spread of the change over valid steps, floored at 1% of the largest
    spread = change_scale(data)
    masks = data["masks"].astype(bool)
    change = (data["next_observations"] - data["observations"])[masks]
    np.testing.assert_allclose(
        spread, np.maximum(change.std(axis=0), change.std(axis=0).max() * 0.01), rtol=1e-5
    )
    still = {**data, "next_observations": data["observations"].copy()}
    steps = (
        np.arange(data["masks"].shape[1])[None, :] * masks
    )  # number 0 moves by t, the rest never
    still["next_observations"][..., 0] += steps
    moving = change_scale(still)
    assert moving[0] == pytest.approx(steps[masks].std(), rel=1e-5)
    assert moving[1:] == [pytest.approx(moving[0] * 0.01)] * 9


def test_outcome_records_are_predicted_and_measured_in_outcome_units(tiny):
    """A consequence record's target (an episode's last state) uses ``outcome_scale``; a
    dynamics record in the same batch keeps the one-step ``state_scale``."""
    import dataclasses

    import torch

    from leap_kalm.llm.grounded import predict_targets
    from leap_kalm.llm.grounding_tasks import dynamics_record, task_record
    from leap_kalm.pipelines.ground_llm.nodes import change_scale

    lm, tokenizer = tiny
    data = kalm_arrays(DISCRETE)
    episodes = episodes_of(data)
    rng = np.random.default_rng(0)
    consequence = [task_record("consequence", e, rng) for e in episodes[:3]]
    dynamics = [dynamics_record(e, 0) for e in episodes[:3]]
    assert all(r["outcome"] for r in consequence) and not any(r["outcome"] for r in dynamics)
    step, outcome = [0.5] * 10, [4.0] * 5 + [8.0] * 5
    spec = dataclasses.replace(DISCRETE, state_scale=step, outcome_scale=outcome)
    model = build_grounded(lm, spec).eval()
    torch.nn.init.zeros_(model.state_head.weight)
    torch.nn.init.ones_(model.state_head.bias)  # "+1 unit" everywhere
    records = consequence + dynamics
    predicted = predict_targets(model, tokenizer, records, batch_size=6)
    start = np.array([r["states"][0] for r in records])
    units = np.array([outcome] * 3 + [step] * 3)
    np.testing.assert_allclose(predicted, start + units, atol=1e-5)
    rows = [tokenize_record(tokenizer, r) for r in records]
    with torch.no_grad():
        loss = model(**collate_grounding(rows, tokenizer.pad_token_id, spec))["state_loss"]
    truth = np.array([r["states"][1] for r in records])
    assert loss.item() == pytest.approx(np.mean(((predicted - truth) / units) ** 2), rel=1e-4)
    # without outcome_scale, outcome records fall back to the one-step unit
    plain = build_grounded(lm, dataclasses.replace(spec, outcome_scale=None)).eval()
    plain.state_head.load_state_dict(model.state_head.state_dict())
    np.testing.assert_allclose(
        predict_targets(plain, tokenizer, consequence, batch_size=3),
        start[:3] + np.array(step),
        atol=1e-5,
    )
    # the unit: the spread of (last valid next state - first state) over episodes
    masks = data["masks"].astype(bool)
    last = masks.shape[1] - 1 - np.argmax(masks[:, ::-1], axis=1)
    change = data["next_observations"][np.arange(len(last)), last] - data["observations"][:, 0]
    np.testing.assert_allclose(
        change_scale(data, over="episode"),
        np.maximum(change.std(axis=0), change.std(axis=0).max() * 0.01),
        rtol=1e-5,
    )
    with pytest.raises(ValueError, match="over must be 'step' or 'episode'"):
        change_scale(data, over="run")

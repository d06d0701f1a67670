"""KALM's imagination: a grounded LM writes rollouts for goals, state by state, action by action.

The prompt is the rollout task's (``llm.grounding_tasks``) up to the start state, which is
given. Then, batched over episodes with one KV cache: the hidden state after the last
slot predicts an action (argmax or sampled for discrete actions, the head's vector for
continuous ones), that action is fed back as a slot, the hidden state after it predicts
the next state, which is fed back in turn. Each episode stops when ``judge`` says its
generated transition ends it (the goal is reached on the generated states) or at
``max_steps``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leap_kalm.llm.grounded import ACTION_SLOT, STATE, STATE_SLOT, encode_slots
from leap_kalm.progress import track

Judge = Callable[[int, np.ndarray, np.ndarray], bool]
"""``judge(episode index, state, next state) -> whether the episode ends there``."""


@dataclass
class Imagined:
    """One imagined rollout: ``n`` actions between ``n + 1`` states, and how it ended."""

    states: np.ndarray  # (n + 1, D)
    actions: np.ndarray  # (n,) int64 or (n, A) float32
    ended: bool  # judge ended it (else it ran to max_steps)


def imagination_prompt(instruction: str) -> str:
    """The rollout task's prompt up to the start state's slot."""
    return f"Task: {instruction}\nTrajectory: {STATE}"


def imagine(
    model: Any,
    tokenizer: Any,
    instructions: Sequence[str],
    starts: np.ndarray,
    judge: Judge,
    max_steps: int,
    batch_size: int = 32,
    temperature: float = 0.0,
    seed: int = 0,
) -> list[Imagined]:
    """Imagine one rollout per instruction from its start state (``starts``: (N, D)).

    Args:
        model: A ``GroundedLM`` (``llm.grounded.load_grounded``).
        tokenizer: Its tokenizer.
        instructions: One instruction per episode.
        starts: The episodes' start states.
        judge: Ends an episode after a generated transition (the world's goal check).
        max_steps: Most actions per episode.
        batch_size: Episodes generated together.
        temperature: 0 takes the most likely discrete action; above 0 samples it.
        seed: Seed of the action sampling.
    """
    import torch

    if len(instructions) != len(starts):
        raise ValueError(
            f"imagine: {len(instructions)} instructions but {len(starts)} start states"
        )
    generator = torch.Generator().manual_seed(seed)
    batches = range(0, len(instructions), batch_size)
    out: list[Imagined] = []
    for lo in track(batches, "imagination", total=len(batches)):
        hi = min(lo + batch_size, len(instructions))
        with torch.no_grad():
            out += _imagine_batch(
                model, tokenizer, instructions[lo:hi], np.asarray(starts[lo:hi]),
                lambda i, s, n, lo=lo: judge(lo + i, s, n), max_steps, temperature, generator,
            )  # fmt: skip
    return out


def _imagine_batch(
    model: Any,
    tokenizer: Any,
    instructions: Sequence[str],
    starts: np.ndarray,
    judge: Judge,
    max_steps: int,
    temperature: float,
    generator: Any,
) -> list[Imagined]:
    import torch

    spec = model.spec
    device = next(model.parameters()).device
    batch = len(instructions)
    encoded = [encode_slots(tokenizer, imagination_prompt(text)) for text in instructions]
    length = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((batch, length), tokenizer.pad_token_id, dtype=torch.long)
    kinds = torch.zeros((batch, length), dtype=torch.long)
    mask = torch.zeros((batch, length), dtype=torch.long)
    for b, (ids, slot_kinds) in enumerate(encoded):  # left padding: every prompt ends at its slot
        input_ids[b, length - len(ids) :] = torch.tensor(ids)
        kinds[b, length - len(ids) :] = torch.tensor(slot_kinds)
        mask[b, length - len(ids) :] = 1
    states = torch.zeros((batch, length, spec.obs_dim))
    states[:, -1] = torch.as_tensor(starts, dtype=torch.float32)
    discrete = spec.action_kind == "discrete"
    no_actions = (
        torch.zeros((batch, length), dtype=torch.long)
        if discrete
        else torch.zeros((batch, length, spec.action_dim))
    )
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    result = model(
        input_ids=input_ids.to(device), slot_kinds=kinds.to(device), states=states.to(device),
        actions=no_actions.to(device), attention_mask=mask.to(device),
        position_ids=positions.to(device), use_cache=True,
    )  # fmt: skip
    cache, last = result["cache"], result["hidden"][:, -1]
    position = positions[:, -1:].to(device)
    mask = mask.to(device)
    trajectory_states = [torch.as_tensor(starts, dtype=torch.float32)]
    trajectory_actions: list[Any] = []
    live = np.ones(batch, dtype=bool)
    lengths = np.zeros(batch, dtype=int)
    ended = np.zeros(batch, dtype=bool)
    pad = torch.full((batch, 1), tokenizer.pad_token_id, dtype=torch.long, device=device)
    for _ in range(max_steps):
        logits = model.action_head(last).float()
        if discrete:
            action = (
                torch.multinomial(
                    torch.softmax(logits / temperature, -1).cpu(), 1, generator=generator
                ).flatten()
                if temperature > 0
                else logits.argmax(-1).cpu()
            )
            fed_actions = action.view(batch, 1).to(device)
        else:
            action = logits.cpu()
            fed_actions = action.view(batch, 1, -1).to(device)
        trajectory_actions.append(action)
        cache, last, position, mask = _feed(
            model, cache, pad, ACTION_SLOT, None, fed_actions, position, mask, spec
        )
        next_state = model.predict_state(last, trajectory_states[-1]).float().cpu()
        trajectory_states.append(next_state)
        for b in np.flatnonzero(live):
            lengths[b] += 1
            if judge(b, trajectory_states[-2][b].numpy(), next_state[b].numpy()):
                live[b], ended[b] = False, True
        if not live.any():
            break
        cache, last, position, mask = _feed(
            model, cache, pad, STATE_SLOT, next_state.view(batch, 1, -1).to(device), None,
            position, mask, spec,
        )  # fmt: skip
    all_states = torch.stack(trajectory_states, 1).numpy()
    all_actions = torch.stack(trajectory_actions, 1).numpy() if trajectory_actions else None
    return [
        Imagined(
            states=all_states[b, : lengths[b] + 1].astype(np.float32),
            actions=(
                all_actions[b, : lengths[b]]
                if all_actions is not None
                else np.zeros((0,) if discrete else (0, spec.action_dim))
            ),
            ended=bool(ended[b]),
        )
        for b in range(batch)
    ]


def _feed(
    model: Any,
    cache: Any,
    pad: Any,
    kind: int,
    state: Any,
    action: Any,
    position: Any,
    mask: Any,
    spec: Any,
) -> tuple[Any, Any, Any, Any]:
    """Append one slot (a state or an action) to every episode; return the new cache, the
    hidden state after it, its position and the grown attention mask."""
    import torch

    batch = pad.shape[0]
    kinds = torch.full_like(pad, kind)
    states = (
        state if state is not None else torch.zeros((batch, 1, spec.obs_dim), device=pad.device)
    )
    if action is None:
        action = (
            torch.zeros_like(pad)
            if spec.action_kind == "discrete"
            else torch.zeros((batch, 1, spec.action_dim), device=pad.device)
        )
    mask = torch.cat([mask, torch.ones_like(pad)], dim=1)
    position = position + 1
    result = model(
        input_ids=pad, slot_kinds=kinds, states=states, actions=action, attention_mask=mask,
        position_ids=position, cache=cache, use_cache=True,
    )  # fmt: skip
    return result["cache"], result["hidden"][:, -1], position, mask

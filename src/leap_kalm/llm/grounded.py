"""KALM's grounded language model: a Hugging Face causal LM that reads and writes an
environment's numeric states and actions.

Prompts are text with placeholders, ``<state>`` and ``<action>``. At a placeholder the
token embedding is replaced by a learnt embedding of the numbers: a linear state encoder
(``obs_dim -> hidden``) and, for actions, an embedding table (discrete) or a small MLP
(continuous). Two heads read the LM's last hidden state: the one *before* a slot predicts
that slot's state (MSE) or action (cross-entropy or MSE), as the LM head predicts the next
token. The loss is the token loss plus the weighted state and action losses (KALM: 0.5
each), computed in ``forward``, so transformers' ``Trainer`` trains it unchanged.

The placeholders never reach the tokenizer: the text between them is tokenized and the
slots are spliced in (``encode_slots``), so any tokenizer works and no vocabulary grows.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ConfigMixin

STATE, ACTION = "<state>", "<action>"
TEXT_SLOT, STATE_SLOT, ACTION_SLOT = 0, 1, 2
ACTION_KINDS = ("discrete", "continuous")
SPEC_FILE = "grounding.json"
HEADS_FILE = "grounding_heads.pt"
_PLACEHOLDER = re.compile(f"({re.escape(STATE)}|{re.escape(ACTION)})")


@dataclass
class GroundingSpec(ConfigMixin):
    """What the grounding layers are shaped for.

    Attributes:
        obs_dim: Numbers in one state.
        action_kind: ``discrete`` (an index per action) or ``continuous`` (a vector).
        action_dim: Number of actions (discrete) or numbers in one action (continuous).
        state_loss_weight: Weight of the state loss in the total (KALM: 0.5).
        action_loss_weight: Weight of the action loss in the total (KALM: 0.5).
        action_mlp_hidden: Hidden width of the continuous action encoder.
        residual_states: The state head predicts the *change* from the latest state shown
            before the slot (its output is added to that state; with none shown, it is the
            state). Measured on CLEVR: a head that wrote whole states predicted held-out
            next states worse than "nothing moves" (MSE 0.0139 against 0.0030;
            ``docs/results.md``), since most of a state carries over unchanged.
        state_scale: Per number of a state, the scale of what the head predicts (the
            spread of the change with ``residual_states``, of the state without): the head
            outputs it in these units and the state loss is measured in them, so it weighs
            like the token loss. Measured on CLEVR: in raw units the state loss was about
            0.003 against a token loss near 3, and a residual head trained with it still
            predicted worse than "nothing moves" (``docs/results.md``). ``None``: raw units.
        outcome_scale: The same for the target of an *outcome* record (consequence
            prediction: the episode's last state from its first), the spread of the change
            over a whole episode. Measured on Meta-World: in the one-step unit the
            consequence target was 596 units away on average (CLEVR: 18), so those
            records drowned the others' losses and the grounded model predicted next
            states worse than "nothing moves". ``None``: ``state_scale``.
    """

    obs_dim: int
    action_kind: str
    action_dim: int
    state_loss_weight: float = 0.5
    action_loss_weight: float = 0.5
    action_mlp_hidden: int = 256
    residual_states: bool = True
    state_scale: list[float] | None = None
    outcome_scale: list[float] | None = None

    def __post_init__(self) -> None:
        if self.action_kind not in ACTION_KINDS:
            raise ValueError(
                f"grounding action_kind must be one of {ACTION_KINDS}, got {self.action_kind!r}"
            )
        if self.obs_dim <= 0 or self.action_dim <= 0:
            raise ValueError(
                f"grounding obs_dim and action_dim must be positive, got {self.obs_dim} and {self.action_dim}"
            )


def encode_slots(tokenizer: Any, text: str) -> tuple[list[int], list[int]]:
    """``(input_ids, slot kinds)`` of a prompt with placeholders.

    Text between placeholders is tokenized as it stands; each placeholder becomes one
    position holding the pad id (its embedding is replaced) and kind ``STATE_SLOT`` or
    ``ACTION_SLOT``; text positions have kind ``TEXT_SLOT``.
    """
    ids: list[int] = []
    kinds: list[int] = []
    for part in _PLACEHOLDER.split(text):
        if part in (STATE, ACTION):
            ids.append(tokenizer.pad_token_id)
            kinds.append(STATE_SLOT if part == STATE else ACTION_SLOT)
        elif part:
            piece = tokenizer(part, add_special_tokens=False)["input_ids"]
            ids += piece
            kinds += [TEXT_SLOT] * len(piece)
    return ids, kinds


def tokenize_record(tokenizer: Any, record: dict[str, Any]) -> dict[str, Any]:
    """A grounding record (``llm.grounding_tasks``) as model inputs, one list per position.

    ``predict`` marks the slots whose value is a target; ``labels`` hold the completion's
    tokens (and an end-of-sequence token) where it has one, -100 elsewhere.

    Raises:
        ValueError: If the record's slot counts do not match its numbers.
    """
    ids, kinds = encode_slots(tokenizer, record["text"])
    n_states, n_actions = kinds.count(STATE_SLOT), kinds.count(ACTION_SLOT)
    if (n_states, n_actions) != (len(record["states"]), len(record["actions"])):
        raise ValueError(
            f"grounding record ({record.get('task')}, episode {record.get('episode')}): "
            f"{n_states} state and {n_actions} action slots, but {len(record['states'])} states "
            f"and {len(record['actions'])} actions"
        )
    flags = {
        STATE_SLOT: iter(record["predict_states"]),
        ACTION_SLOT: iter(record["predict_actions"]),
    }
    predict = [bool(next(flags[k])) if k != TEXT_SLOT else False for k in kinds]
    labels = [-100] * len(ids)
    outcome = bool(record.get("outcome", False))
    if record.get("completion"):
        tail = tokenizer(record["completion"], add_special_tokens=False)["input_ids"]
        tail += [tokenizer.eos_token_id]
        ids, kinds = ids + tail, kinds + [TEXT_SLOT] * len(tail)
        predict, labels = predict + [False] * len(tail), labels + tail
    return {
        "input_ids": ids,
        "slot_kinds": kinds,
        "predict": predict,
        "labels": labels,
        "states": record["states"],
        "actions": record["actions"],
        "outcome": outcome,
    }


def collate_grounding(
    rows: list[dict[str, Any]], pad_id: int, spec: GroundingSpec
) -> dict[str, Any]:
    """Right-padded tensors for ``GroundedLM.forward`` from ``tokenize_record`` rows."""
    import torch

    length = max(len(r["input_ids"]) for r in rows)
    batch = len(rows)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
    slot_kinds = torch.zeros((batch, length), dtype=torch.long)
    attention = torch.zeros((batch, length), dtype=torch.long)
    predict = torch.zeros((batch, length), dtype=torch.bool)
    labels = torch.full((batch, length), -100, dtype=torch.long)
    states = torch.zeros((batch, length, spec.obs_dim), dtype=torch.float32)
    if spec.action_kind == "discrete":
        actions = torch.zeros((batch, length), dtype=torch.long)
    else:
        actions = torch.zeros((batch, length, spec.action_dim), dtype=torch.float32)
    for b, row in enumerate(rows):
        n = len(row["input_ids"])
        input_ids[b, :n] = torch.tensor(row["input_ids"])
        kinds = torch.tensor(row["slot_kinds"])
        slot_kinds[b, :n] = kinds
        attention[b, :n] = 1
        predict[b, :n] = torch.tensor(row["predict"])
        labels[b, :n] = torch.tensor(row["labels"])
        if row["states"]:
            states[b, :n][kinds == STATE_SLOT] = torch.tensor(row["states"], dtype=torch.float32)
        if row["actions"]:
            actions[b, :n][kinds == ACTION_SLOT] = torch.tensor(row["actions"], dtype=actions.dtype)
    return {
        "input_ids": input_ids,
        "slot_kinds": slot_kinds,
        "attention_mask": attention,
        "predict": predict,
        "labels": labels,
        "states": states,
        "actions": actions,
        "outcome": torch.tensor([bool(r.get("outcome", False)) for r in rows]),
    }


def _grounded_module() -> Any:
    """The ``GroundedLM`` class (built on first use, so importing this module stays light)."""
    global _GROUNDED
    if _GROUNDED is None:
        _GROUNDED = _define()
    return _GROUNDED


_GROUNDED: Any = None


def _define() -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F

    class GroundedLM(nn.Module):
        """A causal LM with a state encoder, an action encoder and state/action heads."""

        def __init__(self, lm: Any, spec: GroundingSpec) -> None:
            super().__init__()
            hidden = lm.config.hidden_size
            self.lm, self.spec = lm, spec
            self.state_encoder = nn.Linear(spec.obs_dim, hidden)
            if spec.action_kind == "discrete":
                self.action_encoder: nn.Module = nn.Embedding(spec.action_dim, hidden)
            else:
                self.action_encoder = nn.Sequential(
                    nn.Linear(spec.action_dim, spec.action_mlp_hidden),
                    nn.GELU(),
                    nn.Linear(spec.action_mlp_hidden, hidden),
                )
            self.state_head = nn.Linear(hidden, spec.obs_dim)
            scale = (
                torch.ones(spec.obs_dim)
                if spec.state_scale is None
                else torch.tensor(spec.state_scale)
            )
            self.register_buffer("_state_scale", scale.float(), persistent=False)
            outcome = scale if spec.outcome_scale is None else torch.tensor(spec.outcome_scale)
            self.register_buffer("_outcome_scale", outcome.float(), persistent=False)
            self.action_head = nn.Linear(hidden, spec.action_dim)
            dtype = next(lm.parameters()).dtype
            device = next(lm.parameters()).device
            for module in self.grounding_layers().values():
                module.to(device=device, dtype=dtype)

        @property
        def config(self) -> Any:  # Trainer and peft look for it
            return self.lm.config

        def grounding_layers(self) -> dict[str, nn.Module]:
            return {
                "state_encoder": self.state_encoder,
                "action_encoder": self.action_encoder,
                "state_head": self.state_head,
                "action_head": self.action_head,
            }

        def activation_checkpointing_enable(self, **kwargs: Any) -> None:
            """What ``Trainer`` calls for ``activation_checkpointing``: the LM's own, with
            inputs that require grad (the first layer's input is our embedding sum)."""
            self.lm.activation_checkpointing_enable(**kwargs)
            self.lm.enable_input_require_grads()

        def predict_state(self, hidden: Any, base: Any = None, scale: Any = None) -> Any:
            """The state a hidden state predicts for the next slot; ``base`` (same leading
            shape, the latest state shown before that slot) is added with
            ``residual_states``. ``scale``: the head's unit per prediction (default: the
            one-step ``state_scale``)."""
            out = self.state_head(hidden)
            unit = self._state_scale if scale is None else scale  # ones without state_scale
            out = out * unit.to(device=out.device, dtype=out.dtype)
            if self.spec.residual_states and base is not None:
                out = out + base.to(device=out.device, dtype=out.dtype)
            return out

        def target_scales(self, at: Any, outcome: Any = None) -> Any:
            """(n, obs_dim) the unit of each state target selected by the (B, L) mask
            ``at``: ``outcome_scale`` in outcome rows, ``state_scale`` elsewhere (ones
            without either)."""
            rows = at.nonzero(as_tuple=True)[0]
            step = self._state_scale.to(at.device).expand(len(rows), -1)
            if outcome is None:
                return step
            flagged = outcome.to(at.device).bool()[rows].unsqueeze(-1)
            return torch.where(flagged, self._outcome_scale.to(at.device), step)

        def embed(self, input_ids: Any, slot_kinds: Any, states: Any, actions: Any) -> Any:
            """Token embeddings with every slot replaced by its state or action embedding."""
            embeds = self.lm.get_input_embeddings()(input_ids)
            state_pos = slot_kinds == STATE_SLOT
            action_pos = slot_kinds == ACTION_SLOT
            if state_pos.any():
                encoded = self.state_encoder(states[state_pos].to(embeds.dtype))
                embeds = embeds.masked_scatter(state_pos.unsqueeze(-1), encoded.to(embeds.dtype))
            if action_pos.any():
                chosen = actions[action_pos]
                chosen = (
                    chosen.long()
                    if self.spec.action_kind == "discrete"
                    else chosen.to(embeds.dtype)
                )
                encoded = self.action_encoder(chosen)
                embeds = embeds.masked_scatter(action_pos.unsqueeze(-1), encoded.to(embeds.dtype))
            return embeds

        def forward(
            self,
            input_ids: Any,
            slot_kinds: Any,
            states: Any,
            actions: Any,
            attention_mask: Any = None,
            predict: Any = None,
            labels: Any = None,
            position_ids: Any = None,
            cache: Any = None,
            use_cache: bool = False,
            outcome: Any = None,
        ) -> dict[str, Any]:
            """Run the LM on the grounded embeddings.

            Args:
                input_ids: (B, L) token ids; the pad id at slots.
                slot_kinds: (B, L) ``TEXT_SLOT``, ``STATE_SLOT`` or ``ACTION_SLOT``.
                states: (B, L, obs_dim) the state at each state slot (zeros elsewhere).
                actions: (B, L) action indices or (B, L, action_dim) action vectors.
                attention_mask: (B, L) 1 on real positions.
                predict: (B, L) bool, True at slots whose value is a training target
                    (predicted from the hidden state one position earlier).
                labels: (B, L) token targets (-100 where no token loss).
                position_ids: (B, L) positions (left-padded batches; default 0..L-1).
                cache, use_cache: incremental decoding (imagination): the LM's cache.
                outcome: (B,) bool, True for outcome records, whose state targets are
                    predicted and measured in ``outcome_scale`` units.

            Returns:
                ``loss`` (when ``predict`` or ``labels`` is given), its parts
                ``token_loss``, ``state_loss``, ``action_loss``, the ``hidden`` states
                (B, L, H), the updated ``cache``.
            """
            embeds = self.embed(input_ids, slot_kinds, states, actions)
            keep = _positions_with_labels(labels)
            out = self.lm(
                inputs_embeds=embeds,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=use_cache,
                output_hidden_states=True,
                logits_to_keep=keep if keep is not None else 1,
            )
            hidden = out.hidden_states[-1]
            result: dict[str, Any] = {"hidden": hidden, "cache": out.cache}
            if predict is None and labels is None:
                return result
            zero = hidden.sum() * 0.0  # keeps every branch in the graph
            token_loss = state_loss = action_loss = zero
            if keep is not None:
                targets = labels[:, keep + 1]
                token_loss = F.cross_entropy(
                    out.logits.float().reshape(-1, out.logits.shape[-1]),
                    targets.reshape(-1),
                    ignore_index=-100,
                )
            if predict is not None:
                # the slot at p is predicted from the hidden state at p - 1 (never at p = 0)
                targets_at = predict.bool().clone()
                targets_at[:, 0] = False
                source = hidden[:, :-1]
                state_at = targets_at & (slot_kinds == STATE_SLOT)
                action_at = targets_at & (slot_kinds == ACTION_SLOT)
                if state_at.any():
                    base = latest_states(slot_kinds, states)[:, :-1][state_at[:, 1:]]
                    scale = self.target_scales(state_at[:, 1:], outcome)
                    pred = self.predict_state(source[state_at[:, 1:]], base, scale)
                    state_loss = F.mse_loss(pred.float() / scale, states[state_at].float() / scale)
                if action_at.any():
                    pred = self.action_head(source[action_at[:, 1:]])
                    if self.spec.action_kind == "discrete":
                        action_loss = F.cross_entropy(pred.float(), actions[action_at].long())
                    else:
                        action_loss = F.mse_loss(pred.float(), actions[action_at].float())
            result.update(
                token_loss=token_loss,
                state_loss=state_loss,
                action_loss=action_loss,
                loss=token_loss
                + self.spec.state_loss_weight * state_loss
                + self.spec.action_loss_weight * action_loss,
            )
            return result

        def predict_next(self, hidden_last: Any, base: Any = None) -> tuple[Any, Any]:
            """The state and action (logits or vector) a hidden state predicts for the next
            slot (``base``: the latest state shown, see :meth:`predict_state`)."""
            return self.predict_state(hidden_last, base), self.action_head(hidden_last)

    return GroundedLM


def latest_states(slot_kinds: Any, states: Any) -> Any:
    """(B, L, obs_dim): at each position, the state of the latest state slot at or before
    it (zeros before the first one)."""
    import torch

    batch, length = slot_kinds.shape
    positions = torch.arange(length, device=slot_kinds.device).expand(batch, length)
    at = torch.where(slot_kinds == STATE_SLOT, positions, torch.full_like(positions, -1))
    latest = at.cummax(dim=1).values
    picked = states.gather(1, latest.clamp(min=0).unsqueeze(-1).expand(-1, -1, states.shape[-1]))
    return picked * (latest >= 0).unsqueeze(-1).to(picked.dtype)


def _positions_with_labels(labels: Any) -> Any:
    """Sequence positions whose *next* token has a label in some row (``None``: none)."""
    if labels is None:
        return None
    import torch

    has = (labels[:, 1:] != -100).any(dim=0)
    if not has.any():
        return None
    return torch.nonzero(has).flatten()


def build_grounded(lm: Any, spec: GroundingSpec) -> Any:
    """Wrap a causal LM (or a peft model of one) with new grounding layers."""
    return _grounded_module()(lm, spec)


def save_grounded(model: Any, tokenizer: Any, output_dir: str | Path) -> None:
    """Save the LM (a LoRA adapter folded in), its tokenizer, the grounding layers and spec
    into one model directory."""
    import torch
    from peft import PeftModel

    output_dir = Path(output_dir)
    lm = model.lm.merge_and_unload() if isinstance(model.lm, PeftModel) else model.lm
    lm.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    layers = {name: module.state_dict() for name, module in model.grounding_layers().items()}
    torch.save(layers, output_dir / HEADS_FILE)
    (output_dir / SPEC_FILE).write_text(json.dumps(asdict(model.spec), indent=2), encoding="utf-8")


def load_grounded(
    path: str | Path, device: str | None = None, dtype: str | None = None
) -> tuple[Any, Any]:
    """``(GroundedLM, tokenizer)`` from a directory ``save_grounded`` wrote.

    Raises:
        FileNotFoundError: Naming the directory and the grounding file it lacks.
    """
    import torch

    from leap_kalm.llm.models import load_model

    path = Path(path)
    for name in (SPEC_FILE, HEADS_FILE):
        if not (path / name).exists():
            raise FileNotFoundError(
                f"{path}: no {name}; this is not a grounded model directory "
                "(train one with `kedro run --pipeline=ground_llm`)"
            )
    spec = GroundingSpec.from_dict(json.loads((path / SPEC_FILE).read_text(encoding="utf-8")))
    lm, tokenizer = load_model({"name": str(path)}, device=device, dtype=dtype)
    model = build_grounded(lm, spec)
    layers = torch.load(path / HEADS_FILE, map_location="cpu", weights_only=True)
    for name, module in model.grounding_layers().items():
        module.load_state_dict(layers[name])
    model.eval()
    return model, tokenizer


def predict_targets(
    model: Any, tokenizer: Any, records: list[dict[str, Any]], batch_size: int = 64
) -> Any:
    """The state each record's first target state slot is predicted to hold, (n, obs_dim)
    (e.g. the next state of dynamics records), batched, without gradients."""
    import numpy as np
    import torch

    out = []
    device = next(model.parameters()).device
    for lo in range(0, len(records), batch_size):
        rows = [tokenize_record(tokenizer, r) for r in records[lo : lo + batch_size]]
        batch = collate_grounding(rows, tokenizer.pad_token_id, model.spec)
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.no_grad():
            hidden = model(**{k: v for k, v in batch.items() if k not in ("predict", "labels")})[
                "hidden"
            ]
        target = batch["predict"] & (batch["slot_kinds"] == STATE_SLOT)
        first = target.float().argmax(dim=1)  # each row's first target slot
        if not target.any(dim=1).all():
            raise ValueError("predict_targets: a record has no target state slot")
        rows_at = torch.arange(len(rows), device=device)
        before = hidden[rows_at, first - 1]
        base = latest_states(batch["slot_kinds"], batch["states"])[rows_at, first - 1]
        at = torch.zeros_like(target)
        at[rows_at, first] = True
        scale = model.target_scales(at, batch["outcome"])
        with torch.no_grad():
            out.append(model.predict_state(before, base, scale).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, model.spec.obs_dim), dtype=np.float32)

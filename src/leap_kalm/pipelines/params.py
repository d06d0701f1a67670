"""The stages' parameter dataclasses: each node maps its YAML block onto one of these on
its first line (``LeapParams.from_dict(params)``), and unknown keys are named errors.

Trainer settings live with their trainers (``leap_kalm.training``), teacher settings with
the teacher factory (``leap_kalm.teachers.TeacherParams``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leap_kalm.schemas import ConfigMixin

TRAIN_METHODS = ("sft", "dpo")
START_FROM = ("previous", "base")


@dataclass
class LeapParams(ConfigMixin):
    """One LEAP iteration's settings (``<world>.leap`` in ``parameters_leap.yml``).

    Attributes:
        env: Text world name (``alfworld``).
        train_method: ``sft`` (DAgger-style aggregation) or ``dpo`` (corrected vs original).
        prompt_format: ``leap`` (LEAP's per-step prompt: windowed history and the
            candidate list, one record per step) or ``conversation`` (the episode as one
            chat, trained as one sequence per trajectory, rolled out append-only) or
            ``conversation_places`` (the same, each observation followed by the places
            not visited yet) or ``conversation_compact`` (the same, an observation shown
            earlier in the episode written once: WebShop's results page on every return)
            or ``conversation_recovery`` (the same, the observation after an action that
            was none of its step's candidates, ALFWorld's "Nothing happens.", followed by
            the candidate actions: after a failed action the student sees what it can do
            instead).
        action_selection: ``generate`` (the written action, repaired onto the candidates),
            ``score`` (the reason is generated, then the candidate the student finds most
            likely after it is taken: actions always exist) or ``repair`` (generated, and
            scored only where the written action matches no candidate).
        history_window: Earlier steps shown in the student's prompt (``null``: all).
        rollout_max_steps: Step cap of training rollouts (LEAP: 20).
        eval_max_steps: Step cap of evaluation rollouts (LEAP: 30).
        n_rollout_games: Train games rolled out per iteration (``null``: all).
        batch_size: Episodes decoded together.
        sampling: Rollout sampling settings (``SamplingParams``).
        eval_sampling: Evaluation sampling settings (greedy by default).
        eval_splits: Splits evaluated.
        eval_fresh_process: Evaluate in a newly spawned process (generation after training
            in the same process was measured 1.4x slower).
        val_fraction: Share of trajectories held out from SFT training.
        dagger_actions_per_iteration: From iteration 1 on, the SFT set takes at most this
            many supervised actions from each iteration (``null``: as many as the
            smallest iteration has); bounds the training time of later iterations.
        dagger_expert_actions: From iteration 1 on, the expert episodes (iteration 0)
            contribute this many supervised actions, apart from the balance of the later
            iterations (``null``: they are balanced like every other iteration).
        trained_steps: What a corrected trajectory trains: ``trajectory`` (every step, the
            teacher's answer where it kept the student's action and where it corrected
            it), ``corrected`` (only the corrected steps; the kept ones are context) or
            ``first`` (the steps up to and including the first correction).
        trained_corrections: SFT trains a corrected trajectory up to and including its
            N-th correction, nothing after it (``null``: to its end). With whole-episode
            chats every correction is a segment that re-encodes the trajectory so far, so
            a rollout corrected at nearly every step costs tokens quadratic in its length.
        untrained_correction_verbs: Corrections whose teacher action has one of these
            verbs (``go`` for ``go to shelf 1``) are not trained: the step keeps the
            student's own answer as context and does not count towards
            ``trained_corrections``. Needs ``trained_steps: corrected`` (the other settings
            would train the student's own answer there). ``[]``: every correction.
        capped_correction_verbs: With these verbs (``[go]``), ``trained_corrections``
            counts only the corrections whose teacher action has one of them and cuts only
            those: a later correction with another verb (``take``, ``move``, ``cool``) is
            trained wherever it falls. Needs ``trained_steps: corrected`` and
            ``trained_corrections``. ``[]``: every correction counts.
        uncapped_invalid_corrections: A correction of an action that was not among the
            step's candidates (``go to drawer 4`` in a room with three drawers) is trained
            wherever it falls and does not count towards ``trained_corrections``. Needs
            ``trained_steps: corrected`` and ``trained_corrections``.
        invalid_corrections_as_recovery: A correction of an action that was not among the
            step's candidates is trained after it: the student's action and the
            observation it got ("Nothing happens.") stay in the chat and the teacher's
            answer follows, so its critique names an action the chat shows
            (``llm.records.invalid_corrections_as_recovery``). ``false``: the teacher's
            answer replaces the student's (LEAP). Needs ``correction_packing: segments``.
        correction_packing: How a conversation format lays out a corrected trajectory:
            ``segments`` (a chat per correction, each re-encoding the trajectory up to it)
            or ``branches`` (one chat per trajectory, each correction a branch off the
            chat before it under a 4-D attention mask: the same answers in the same
            contexts for linear tokens; needs sdpa or eager attention).
        dpo_contrast_ratio: ``train_method: dpo`` only: besides one pair per corrected
            step, for each action the corrections chose ``n`` times, ``n`` x this many
            pairs that prefer the student's approved step over that action where it was a
            candidate (``llm.records.contrast_pairs_from_kept_steps``); 0: LEAP's pairs
            only.
        start_from: Where an SFT iteration ``i >= 1`` starts: ``previous`` (the previous
            student, with the trainer's ``later_iterations`` settings, on the balanced
            DAgger set) or ``base`` (DAgger as Ross et al. run it: the base model retrained
            with iteration 0's settings on every expert episode plus the corrections of
            iterations ``1..i``, balanced among themselves; ``dagger_expert_actions``, when
            set, still caps the expert episodes). DPO always refines the previous student.
        seed: Seed for subsampling and sampling.
    """

    env: str = "alfworld"
    train_method: str = "sft"
    prompt_format: str = "leap"
    action_selection: str = "generate"
    history_window: int | None = 2
    rollout_max_steps: int = 20
    eval_max_steps: int = 30
    n_rollout_games: int | None = None
    batch_size: int = 8
    sampling: dict[str, Any] = field(
        default_factory=lambda: {"temperature": 0.7, "top_p": 0.95, "max_new_tokens": 80}
    )
    eval_sampling: dict[str, Any] = field(
        default_factory=lambda: {"temperature": 0.0, "max_new_tokens": 80}
    )
    eval_splits: list[str] = field(default_factory=lambda: ["valid_seen", "valid_unseen"])
    eval_fresh_process: bool = True
    val_fraction: float = 0.15
    dagger_actions_per_iteration: int | None = None
    dagger_expert_actions: int | None = None
    trained_steps: str = "trajectory"
    trained_corrections: int | None = None
    untrained_correction_verbs: list[str] = field(default_factory=list)
    capped_correction_verbs: list[str] = field(default_factory=list)
    uncapped_invalid_corrections: bool = False
    invalid_corrections_as_recovery: bool = False
    correction_packing: str = "segments"
    dpo_contrast_ratio: float = 0.0
    start_from: str = "previous"
    seed: int = 0

    def student_settings(self, max_steps: int) -> Any:
        """How the student prompts itself in this world (``llm.agent.StudentSettings``)."""
        from leap_kalm.llm.agent import StudentSettings

        return StudentSettings(
            self.env,
            self.history_window,
            max_steps,
            self.batch_size,
            self.prompt_format,
            self.action_selection,
        )

    def __post_init__(self) -> None:
        if self.train_method not in TRAIN_METHODS:
            raise ValueError(
                f"leap.train_method must be one of {TRAIN_METHODS}, got {self.train_method!r}"
            )
        from leap_kalm.envs.registry import world_names

        if self.env not in world_names("text"):
            raise ValueError(
                f"leap.env must be a text world ({', '.join(world_names('text'))}), got {self.env!r}"
            )
        from leap_kalm.llm.agent import ACTION_SELECTIONS

        if self.action_selection not in ACTION_SELECTIONS:
            raise ValueError(
                f"leap.action_selection must be one of {ACTION_SELECTIONS}, got {self.action_selection!r}"
            )
        from leap_kalm.llm.records import TRAINED_STEPS

        if self.trained_steps not in TRAINED_STEPS:
            raise ValueError(
                f"leap.trained_steps must be one of {TRAINED_STEPS}, got {self.trained_steps!r}"
            )
        from leap_kalm.llm.records import CORRECTION_PACKINGS

        if self.correction_packing not in CORRECTION_PACKINGS:
            raise ValueError(
                f"leap.correction_packing must be one of {CORRECTION_PACKINGS}, "
                f"got {self.correction_packing!r}"
            )
        if self.trained_corrections is not None and self.trained_corrections < 1:
            raise ValueError(
                f"leap.trained_corrections must be at least 1 or null, got {self.trained_corrections!r}"
            )
        for name in ("uncapped_invalid_corrections", "invalid_corrections_as_recovery"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"leap.{name} must be true or false, got {getattr(self, name)!r}")
        if self.invalid_corrections_as_recovery and self.correction_packing != "segments":
            raise ValueError(
                "leap.invalid_corrections_as_recovery needs leap.correction_packing: segments "
                f"(a recovery step adds a turn a branch cannot hold), got {self.correction_packing!r}"
            )
        # settings that change what the cap counts: meaningless without a cap on corrections
        for name in ("capped_correction_verbs", "uncapped_invalid_corrections"):
            if getattr(self, name) and (
                self.trained_steps != "corrected" or self.trained_corrections is None
            ):
                raise ValueError(
                    f"leap.{name} needs leap.trained_steps: corrected and "
                    f"leap.trained_corrections set, got trained_steps {self.trained_steps!r}, "
                    f"trained_corrections {self.trained_corrections}"
                )
        if self.untrained_correction_verbs and self.trained_steps != "corrected":
            raise ValueError(
                "leap.untrained_correction_verbs needs leap.trained_steps: corrected (with "
                f"{self.trained_steps!r} an untrained correction's step would train the "
                f"student's own answer), got verbs {list(self.untrained_correction_verbs)}"
            )
        if self.start_from not in START_FROM:
            raise ValueError(
                f"leap.start_from must be one of {START_FROM}, got {self.start_from!r}"
            )
        if self.dpo_contrast_ratio < 0:
            raise ValueError(
                f"leap.dpo_contrast_ratio must be >= 0, got {self.dpo_contrast_ratio!r}"
            )
        from leap_kalm.llm.prompts import PROMPT_FORMATS

        if self.prompt_format not in PROMPT_FORMATS:
            raise ValueError(
                f"leap.prompt_format must be one of {PROMPT_FORMATS}, got {self.prompt_format!r}"
            )


@dataclass
class TextIngestParams(ConfigMixin):
    """Where a text world's games come from and how many expert logs to record
    (``<world>.ingest``).

    Attributes:
        source: ``generated`` (made offline) or ``real`` (the official data).
        data_dir: Official data root for ``real`` (``null``: the world's own default).
        games_dir: Where generated games are written (the equivalent of a download folder).
        n_games: Games per split when generating; with ``real``, a cap (``null``: all).
        seed: Generation seed.
        expert_max_steps: Step cap for the scripted expert.
        demos: A file of human demonstrations to use instead of the scripted expert's logs
            (WebShop: ``il_trajs_finalized_images.jsonl``); only the train games it
            demonstrates get expert logs.
        expert_searches: How the scripted expert picks what to open, for a world whose
            expert has a choice (WebShop: ``plan``, straight to the goal product, or
            ``page``, from what the pages show); ``null``: the world's own.
        expert_games: Expert logs (or demonstrations) on the first this many train games
            only (``null``: every train game). The student's rollouts still draw from every
            train game, so the later iterations' corrections land on goals the
            demonstrations never showed (DAgger's setting: few demonstrations, on-policy
            states from many more games).
    """

    source: str = "generated"
    data_dir: str | None = None
    games_dir: str = "data/01_raw/alfworld/generated"
    n_games: dict[str, int | None] = field(
        default_factory=lambda: {"train": 60, "valid_seen": 12, "valid_unseen": 12}
    )
    seed: int = 0
    expert_max_steps: int = 50
    demos: str | None = None
    expert_searches: str | None = None
    expert_games: int | None = None

    def __post_init__(self) -> None:
        if self.source not in ("generated", "real"):
            raise ValueError(f"ingest: source must be 'generated' or 'real', got {self.source!r}")
        if self.expert_games is not None and (
            isinstance(self.expert_games, bool)
            or not isinstance(self.expert_games, int)
            or self.expert_games < 1
        ):
            raise ValueError(
                f"ingest: expert_games must be a positive number of train games or null, "
                f"got {self.expert_games!r}"
            )


AlfWorldIngestParams = TextIngestParams


@dataclass
class KalmIngestParams(ConfigMixin):
    """Scripted-policy offline data for a KALM world (``<world>.ingest``).

    Attributes:
        n_episodes: Episodes (CLEVR-Robot).
        tasks: Tasks (Meta-World: KALM names, mapped onto v3); ``null`` = the level's list.
        n_per_task: Episodes per task (Meta-World).
        level: Goal level of the data (``real`` for training data).
        horizon: Episode length ``T`` (``null``: the world's default).
        noise: Random-action probabilities; each episode draws one (``null``: the default).
        n_instructions: Paraphrases ``K`` per episode.
        seed: Seed of scenes, goals, policy noise.
    """

    n_episodes: int = 1000
    tasks: list[str] | None = None
    n_per_task: int = 20
    level: str = "real"
    horizon: int | None = None
    noise: list[float] | None = None
    n_instructions: int = 3
    seed: int = 0

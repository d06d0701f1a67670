"""KALM's Meta-World task lists mapped onto Meta-World v3, with instructions.

KALM (built on Meta-World v2 with its own observation layout) used:

- train (real and rephrase levels): reach, push, pick-place, button-press,
  door-unlock, door-open, window-open, faucet-open, coffee-push, coffee-button;
- easy: the ``-wall`` variants of reach, push, pick-place and button-press, plus the
  contrast skills door-lock, door-close, window-close, faucet-close;
- hard: make-coffee, locked-door-open (both KALM additions, composed of training
  skills), hammer and soccer.

PyPI ``metaworld`` 3.1.1 ships v3 versions of all but KALM's two composed tasks, so
those are listed in :data:`NO_V3_COUNTERPART` with the reason and the closest v3
substitutes. Observations are Meta-World's own 39-d vectors (hand, gripper, two
objects, the previous frame's copy, goal), not KALM's 91-d entity layout.

Instructions were written for this project: ``TRAIN_INSTRUCTIONS`` for the real
level and ``HELDOUT_INSTRUCTIONS`` (different wordings of the same tasks) for the
rephrase level; easy and hard tasks have their own.
"""

from __future__ import annotations

KALM_TRAIN_TASKS: tuple[str, ...] = (
    "reach",
    "push",
    "pick-place",
    "button-press",
    "door-unlock",
    "door-open",
    "window-open",
    "faucet-open",
    "coffee-push",
    "coffee-button",
)
KALM_EASY_TASKS: tuple[str, ...] = (
    "reach-wall",
    "push-wall",
    "pick-place-wall",
    "button-press-wall",
    "door-lock",
    "door-close",
    "window-close",
    "faucet-close",
)
KALM_HARD_TASKS: tuple[str, ...] = ("make-coffee", "locked-door-open", "hammer", "soccer")

#: KALM tasks without a Meta-World v3 environment, why, and the v3 tasks closest to them.
NO_V3_COUNTERPART: dict[str, dict[str, object]] = {
    "make-coffee": {
        "reason": "KALM's own v2 composition (push the mug under the machine, then press "
        "its button); Meta-World v3 has no such environment.",
        "closest_v3": ("coffee-push-v3", "coffee-button-v3"),
    },
    "locked-door-open": {
        "reason": "KALM's own v2 composition (unlock the door, then open it); Meta-World v3 "
        "has no such environment.",
        "closest_v3": ("door-unlock-v3", "door-open-v3"),
    },
}


def v3_name(task: str) -> str:
    """Meta-World v3 environment name of a KALM task (``"push"`` -> ``"push-v3"``)."""
    base = task.removesuffix("-v2").removesuffix("-v3").removesuffix("-goal-observable")
    if base in NO_V3_COUNTERPART:
        raise KeyError(
            f"KALM task {task!r} has no Meta-World v3 counterpart: "
            f"{NO_V3_COUNTERPART[base]['reason']}"
        )
    return f"{base}-v3"


TASKS_BY_LEVEL: dict[str, tuple[str, ...]] = {
    "real": tuple(v3_name(t) for t in KALM_TRAIN_TASKS),
    "rephrase": tuple(v3_name(t) for t in KALM_TRAIN_TASKS),
    "easy": tuple(v3_name(t) for t in KALM_EASY_TASKS),
    "hard": tuple(v3_name(t) for t in KALM_HARD_TASKS if t not in NO_V3_COUNTERPART),
}

TRAIN_INSTRUCTIONS: dict[str, tuple[str, ...]] = {
    "reach-v3": (
        "Move the gripper to the goal position.",
        "Bring the end effector to the target point.",
        "Reach for the marked location with the gripper.",
        "Take the gripper over to the goal.",
        "Put the robot's hand at the target spot.",
        "Guide the arm so the gripper arrives at the goal.",
    ),
    "push-v3": (
        "Push the puck to the goal position.",
        "Slide the puck over to the target with the gripper.",
        "Use the gripper to shove the puck onto the goal.",
        "Move the puck to the target by pushing it.",
        "Nudge the puck along the table until it reaches the goal.",
        "Drive the puck to the marked spot.",
    ),
    "pick-place-v3": (
        "Pick up the puck and place it at the goal.",
        "Grasp the puck and put it down at the target location.",
        "Lift the puck and carry it to the goal position.",
        "Grab the puck, move it and set it at the target.",
        "Take the puck in the gripper and drop it off at the goal.",
        "Pick the puck up and bring it to the marked point.",
    ),
    "button-press-v3": (
        "Press the button.",
        "Push the button in with the gripper.",
        "Use the gripper to press the button on the box.",
        "Hit the button until it is fully pressed.",
        "Press down the button in front of the robot.",
        "Poke the button with the gripper.",
    ),
    "door-unlock-v3": (
        "Unlock the door.",
        "Turn the lock to unlock the door.",
        "Rotate the door's lock to the open position.",
        "Use the gripper to unlock the door lock.",
        "Release the door's lock.",
        "Twist the lock so the door is unlocked.",
    ),
    "door-open-v3": (
        "Open the door.",
        "Pull the door open by its handle.",
        "Grab the door handle and swing the door open.",
        "Use the gripper to open the door.",
        "Swing the door wide open.",
        "Pull on the handle until the door is open.",
    ),
    "window-open-v3": (
        "Open the window.",
        "Slide the window open.",
        "Push the window's handle to open it.",
        "Use the gripper to slide the window to the open position.",
        "Move the window sash so the window is open.",
        "Open the sliding window with the gripper.",
    ),
    "faucet-open-v3": (
        "Turn the faucet on.",
        "Rotate the faucet handle to open it.",
        "Open the faucet.",
        "Twist the tap handle to turn the water on.",
        "Use the gripper to turn the faucet open.",
        "Swing the faucet handle to the open side.",
    ),
    "coffee-push-v3": (
        "Push the mug under the coffee machine.",
        "Slide the cup to the coffee machine.",
        "Move the mug into place under the coffee maker.",
        "Push the coffee cup to the machine's spout.",
        "Use the gripper to shove the mug under the coffee machine.",
        "Place the mug below the coffee machine by pushing it.",
    ),
    "coffee-button-v3": (
        "Press the button on the coffee machine.",
        "Push the coffee machine's button.",
        "Start the coffee machine by pressing its button.",
        "Use the gripper to hit the coffee maker's button.",
        "Press the coffee button.",
        "Poke the button on the front of the coffee machine.",
    ),
}

HELDOUT_INSTRUCTIONS: dict[str, tuple[str, ...]] = {
    "reach-v3": (
        "I need your hand hovering right where the goal marker is.",
        "Could you position the claw exactly at the destination point?",
        "Get that manipulator over to the goal coordinates, please.",
    ),
    "push-v3": (
        "That puck should be sitting on the goal; shove it there without lifting it.",
        "Could you slide the little disc across until it covers the target?",
        "Without picking it up, get the puck onto the goal mark.",
    ),
    "pick-place-v3": (
        "Lift that puck off the table and set it down exactly on the goal.",
        "I'd like the puck relocated to the target, carried rather than pushed.",
        "Could you pluck the puck up and deliver it to the goal point?",
    ),
    "button-press-v3": (
        "That button needs to be pushed all the way in, please.",
        "Could you depress the switch on the box?",
        "Give the button a firm press until it clicks in.",
    ),
    "door-unlock-v3": (
        "The door is locked; could you release it?",
        "I can't get through while it's locked, please undo the lock.",
        "Flip the latch so the door is no longer locked.",
    ),
    "door-open-v3": (
        "I'd like the door swung open, please.",
        "Could you get that door open for me?",
        "The door is shut; pull it open by the handle.",
    ),
    "window-open-v3": (
        "It's stuffy in here, could you slide the window open?",
        "Please get the window open.",
        "Let some air in by sliding the window across.",
    ),
    "faucet-open-v3": (
        "I need water, could you turn the tap on?",
        "Get the faucet running, please.",
        "Twist the tap into its open position so water flows.",
    ),
    "coffee-push-v3": (
        "Get the mug positioned under the coffee maker's spout.",
        "Could you slide my cup over beneath the coffee machine?",
        "The mug belongs under the machine; move it there.",
    ),
    "coffee-button-v3": (
        "I'd love a coffee, could you start the machine?",
        "Switch the coffee maker on with its button.",
        "Hit the brew button on the coffee machine, please.",
    ),
}

EASY_INSTRUCTIONS: dict[str, tuple[str, ...]] = {
    "reach-wall-v3": (
        "Move the gripper to the goal; there is a wall in the way.",
        "Reach the target point while avoiding the wall.",
        "Get the gripper past the wall to the goal position.",
    ),
    "push-wall-v3": (
        "Push the puck to the goal around the wall.",
        "Slide the puck to the target while steering clear of the wall.",
        "Shove the puck past the wall onto the goal.",
    ),
    "pick-place-wall-v3": (
        "Pick up the puck and place it at the goal behind the wall.",
        "Lift the puck over the wall and put it at the target.",
        "Carry the puck across the wall to the goal position.",
    ),
    "button-press-wall-v3": (
        "Press the button behind the wall.",
        "Reach around the wall and push the button.",
        "Push in the button even though a wall is in front of it.",
    ),
    "door-lock-v3": (
        "Lock the door.",
        "Turn the lock so the door is locked.",
        "Rotate the door's lock to the locked position.",
    ),
    "door-close-v3": (
        "Close the door.",
        "Push the door shut.",
        "Swing the open door closed.",
    ),
    "window-close-v3": (
        "Close the window.",
        "Slide the window shut.",
        "Push the window's handle to close it.",
    ),
    "faucet-close-v3": (
        "Turn the faucet off.",
        "Rotate the faucet handle to close it.",
        "Close the tap.",
    ),
}

HARD_INSTRUCTIONS: dict[str, tuple[str, ...]] = {
    "hammer-v3": (
        "Pick up the hammer and drive the nail in.",
        "Use the hammer to hit the nail into the wall.",
        "Grab the hammer and knock the nail all the way in.",
    ),
    "soccer-v3": (
        "Kick the ball into the goal.",
        "Push the soccer ball into the net.",
        "Score by moving the ball into the goal.",
    ),
}


def instructions_for(task: str, level: str = "real") -> tuple[str, ...]:
    """Instructions for a v3 task at ``level`` (rephrase uses the held-out wordings)."""
    name = task if task.endswith("-v3") else v3_name(task)
    tables = {
        "real": TRAIN_INSTRUCTIONS,
        "rephrase": HELDOUT_INSTRUCTIONS,
        "easy": EASY_INSTRUCTIONS,
        "hard": HARD_INSTRUCTIONS,
    }
    if level not in tables:
        raise ValueError(f"unknown level {level!r}; expected one of {tuple(tables)}")
    for table in (tables[level], TRAIN_INSTRUCTIONS, EASY_INSTRUCTIONS, HARD_INSTRUCTIONS):
        if name in table:
            return table[name]
    raise KeyError(f"no instructions for Meta-World task {name!r}")

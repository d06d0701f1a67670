"""MuJoCo scene of CLEVR-Robot: a table, four walls, five balls and a kinematic pusher.

Push semantics follow clevr_robot_env's ``perfect`` action type: action ``a`` picks
ball ``a // 8`` and direction ``PUSH_DIRECTIONS[a % 8]`` (the same eight vectors,
diagonals of length 1.13); the pusher is teleported to ``ball - 0.15 * direction``
and then driven along ``direction``.

Choice made here (documented deviation): the original drives a point mass with a
constant motor force for 0.4 s, so the pusher sweeps ~0.6 m across the table and
knocks into whatever lies in its path. Here the pusher is a mocap sphere that
travels exactly ``0.15 * direction`` over 20 physics steps, is then parked off the
table, and the balls are left to settle. One push moves a free ball about 0.165 m
in the pushed direction (KALM's data: median 0.17 m), balls in the way are pushed
on by real contacts, and walls stop balls. After settling, velocities are zeroed,
ball orientations reset and ball heights restored, so the 10-d ball positions are
the whole (Markov) state: :meth:`ClevrPhysics.push` is a pure function of them.
"""

from __future__ import annotations

import numpy as np

N_BALLS = 5
BALL_RADIUS = 0.13
PUSHER_RADIUS = 0.05
COLORS: tuple[str, ...] = ("red", "blue", "green", "purple", "cyan")
_RGBA = ("1 0.1 0.1 1", "0.2 0.5 1 1", "0.2 1 0 1", "0.8 0.2 1 1", "0.2 1 1 1")

#: The eight push directions of clevr_robot_env (x right, y behind/away).
PUSH_DIRECTIONS = np.array(
    [[1, 0], [0, 1], [-1, 0], [0, -1], [0.8, 0.8], [-0.8, 0.8], [0.8, -0.8], [-0.8, -0.8]],
    dtype=np.float64,
)
N_ACTIONS = N_BALLS * len(PUSH_DIRECTIONS)

PUSH_OFFSET = 0.15  # pusher starts at ball - PUSH_OFFSET * direction (as the original)
PUSH_TRAVEL = 0.15  # pusher then travels PUSH_TRAVEL * direction
PUSH_FRAMES = 20
SETTLE_FRAMES = 100
SETTLE_SPEED = 1e-3
NOMINAL_PUSH_DISTANCE = 0.165  # measured displacement of a free ball after one push

#: Inner faces of the walls; ball centres stay BALL_RADIUS inside them.
ARENA_X = (-0.68, 0.68)
ARENA_Y = (-0.43, 0.73)
#: Where ball centres can be: the arena shrunk by one radius.
REACHABLE_X = (ARENA_X[0] + BALL_RADIUS, ARENA_X[1] - BALL_RADIUS)
REACHABLE_Y = (ARENA_Y[0] + BALL_RADIUS, ARENA_Y[1] - BALL_RADIUS)
#: Initial positions are drawn as in clevr_robot_env's scene generator.
SPAWN_X = (-0.5, 0.5)
SPAWN_Y = (-0.3, 0.5)
MIN_SPAWN_DISTANCE = 2 * BALL_RADIUS + 0.1

_TABLE_Z = -0.325
_PARK = (0.0, -3.0)


def build_mjcf() -> str:
    """Return the MJCF string of the scene (our own model, not the original XML)."""
    (x0, x1), (y0, y1) = ARENA_X, ARENA_Y
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    hx, hy, t = (x1 - x0) / 2, (y1 - y0) / 2, 0.05
    walls = (
        f'<geom name="wall_left" type="box" pos="{x0 - t} {cy} -0.2" size="{t} {hy + 2 * t} 0.2"/>'
        f'<geom name="wall_right" type="box" pos="{x1 + t} {cy} -0.2" size="{t} {hy + 2 * t} 0.2"/>'
        f'<geom name="wall_front" type="box" pos="{cx} {y0 - t} -0.2" size="{hx + 2 * t} {t} 0.2"/>'
        f'<geom name="wall_behind" type="box" pos="{cx} {y1 + t} -0.2" size="{hx + 2 * t} {t} 0.2"/>'
    )
    balls = "".join(
        f'<body name="ball_{c}" pos="{-0.4 + 0.2 * i} 0 {_TABLE_Z + BALL_RADIUS}">'
        f'<joint name="ball_{c}" type="free" damping="0.75"/>'
        f'<geom name="ball_{c}" type="sphere" size="{BALL_RADIUS}" density="1" rgba="{rgba}" '
        f'contype="1" conaffinity="3"/></body>'
        for i, (c, rgba) in enumerate(zip(COLORS, _RGBA, strict=True))
    )
    # Collision bits: balls (1|2) meet the table/walls (1) and the pusher (2); the
    # pusher (type 2, affinity 0) meets only balls, so it can be parked anywhere.
    return f"""<mujoco model="leap_kalm_clevr">
  <option timestep="0.01" integrator="Euler" gravity="0 0 -9.81"/>
  <default><geom friction="0.8 0.1 0.1" margin="0.002" condim="3" contype="4" conaffinity="1"/></default>
  <worldbody>
    <light diffuse=".5 .5 .5" pos="0 0 3" dir="0 0 -1"/>
    <geom name="table" type="plane" pos="0 {cy} {_TABLE_Z}" size="1.2 1.2 0.1" contype="1" conaffinity="1"/>
    {walls}
    {balls}
    <body name="pusher" mocap="true" pos="{_PARK[0]} {_PARK[1]} {_TABLE_Z + BALL_RADIUS}">
      <geom name="pusher" type="sphere" size="{PUSHER_RADIUS}" rgba="1 1 1 1" contype="2" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>"""


class ClevrPhysics:
    """Owns one MuJoCo model/data pair and applies pushes to 10-d ball positions."""

    def __init__(self) -> None:
        import mujoco

        self._mj = mujoco
        self.model = mujoco.MjModel.from_xml_string(build_mjcf())
        self.data = mujoco.MjData(self.model)
        self._qadr = np.array(
            [self.model.jnt_qposadr[self.model.joint(f"ball_{c}").id] for c in COLORS]
        )
        self._vadr = np.array(
            [self.model.jnt_dofadr[self.model.joint(f"ball_{c}").id] for c in COLORS]
        )
        self._rest_z = self._measure_rest_height()

    def _measure_rest_height(self) -> float:
        positions = np.array([[-0.4 + 0.2 * i, 0.1] for i in range(N_BALLS)]).reshape(-1)
        self._load(positions, z=_TABLE_Z + BALL_RADIUS)
        self._mj.mj_step(self.model, self.data, nstep=50)
        return float(np.mean(self.data.qpos[self._qadr + 2]))

    def _load(self, positions: np.ndarray, z: float | None = None) -> None:
        d = self.data
        self._mj.mj_resetData(self.model, d)  # also clears warm starts: pushes are pure functions
        xy = np.asarray(positions, dtype=np.float64).reshape(N_BALLS, 2)
        for i, adr in enumerate(self._qadr):
            d.qpos[adr : adr + 2] = xy[i]
            d.qpos[adr + 2] = self._rest_z if z is None else z
            d.qpos[adr + 3 : adr + 7] = (1.0, 0.0, 0.0, 0.0)
        d.mocap_pos[0, :2] = _PARK
        self._mj.mj_forward(self.model, d)

    def _read(self) -> np.ndarray:
        return np.concatenate([self.data.qpos[a : a + 2] for a in self._qadr]).astype(np.float64)

    def settle(self, positions: np.ndarray) -> np.ndarray:
        """Let a hand-placed configuration relax (resolves overlaps and wall penetration)."""
        self._load(positions)
        self._run_settle()
        return self._read()

    def _run_settle(self) -> None:
        d, m = self.data, self.model
        for _ in range(SETTLE_FRAMES):
            self._mj.mj_step(m, d)
            if np.abs(d.qvel).max() < SETTLE_SPEED:
                break

    def push(self, positions: np.ndarray, action: int) -> np.ndarray:
        """Apply discrete action ``action`` to ``positions`` (10,) and return the new (10,)."""
        ball, direction = divmod(int(action), len(PUSH_DIRECTIONS))
        vec = PUSH_DIRECTIONS[direction]
        self._load(positions)
        start = self.data.qpos[self._qadr[ball] : self._qadr[ball] + 2] - PUSH_OFFSET * vec
        for k in range(1, PUSH_FRAMES + 1):
            self.data.mocap_pos[0, :2] = start + vec * PUSH_TRAVEL * k / PUSH_FRAMES
            self._mj.mj_step(self.model, self.data)
        self.data.mocap_pos[0, :2] = _PARK
        self._run_settle()
        return self._read()

from dataclasses import dataclass, field

import pytest

from leap_kalm.schemas import ConfigMixin


@dataclass
class Inner(ConfigMixin):
    r: int = 1


@dataclass
class Outer(ConfigMixin):
    steps: int = 2
    inner: Inner = field(default_factory=Inner)
    extra: dict = field(default_factory=dict)


def test_config_mixin_maps_nested_and_rejects_unknown():
    config = Outer.from_dict({"steps": 5, "inner": {"r": 8}, "extra": {"a": 1}})
    assert config == Outer(steps=5, inner=Inner(r=8), extra={"a": 1})
    assert Outer.from_dict(None) == Outer()
    with pytest.raises(
        ValueError,
        match=r"Outer: unknown keys \['step'\]; expected some of \['extra', 'inner', 'steps'\]",
    ):
        Outer.from_dict({"step": 1})
    with pytest.raises(ValueError, match=r"Inner: unknown keys \['alpha'\]"):
        Outer.from_dict({"inner": {"alpha": 3}})

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


@dataclass
class Listed(ConfigMixin):
    names: list[str] = field(default_factory=list)
    maybe: list[int] | None = None
    label: str = "x"
    either: list[str] | str = "all"


def test_config_mixin_refuses_a_string_for_a_list_field():
    """A YAML or ``--params`` string where a list is declared (``go`` for ``[go]``) would
    be read as its characters; it is refused with the field's name."""
    assert Listed.from_dict({"names": ["go"], "maybe": None, "label": "y"}) == Listed(
        ["go"], None, "y"
    )
    assert Listed.from_dict({"maybe": [1, 2]}).maybe == [1, 2]
    assert Listed.from_dict({"either": "some"}).either == "some"  # a string is allowed here
    with pytest.raises(
        ValueError,
        match=r"Listed.names must be a list, got the string 'go' \(one item is written \[go\]\)",
    ):
        Listed.from_dict({"names": "go"})
    with pytest.raises(ValueError, match=r"Listed.maybe must be a list, got the string '3'"):
        Listed.from_dict({"maybe": "3"})


def test_every_project_config_resolves_its_list_fields():
    """``from_dict`` reads each config's type hints; every config of the project resolves
    them (an unresolvable annotation would fail at run time, not here)."""
    import importlib
    import pkgutil

    import leap_kalm
    from leap_kalm.schemas import _list_fields

    for module in pkgutil.walk_packages(leap_kalm.__path__, "leap_kalm."):
        if not module.name.endswith(("__main__", "pipeline_registry", "settings")):
            importlib.import_module(module.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    configs = [c for c in subclasses(ConfigMixin) if c.__module__.startswith("leap_kalm.")]
    assert len(configs) > 10
    listed = {c.__name__: _list_fields(c) for c in configs}
    assert {"eval_splits", "untrained_correction_verbs"} <= listed["LeapParams"]
    assert "target_modules" not in listed["LoraParams"]  # list or string

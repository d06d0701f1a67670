"""`llm.student`: the one path from a model to the student policy."""

from leap_kalm.llm.agent import StudentPolicy, StudentSettings
from leap_kalm.llm.student import load_student_policy, model_id_of, model_load_kwargs
from leap_kalm.schemas import ModelRef


def test_model_load_kwargs_keep_only_set_device_and_dtype():
    params = {"name": "x", "device": "cpu", "dtype": "", "other": 1}
    assert model_load_kwargs(params) == {"device": "cpu"}
    assert model_load_kwargs({"device": "cuda", "dtype": "bfloat16"}, ("dtype",)) == {
        "dtype": "bfloat16"
    }


def test_model_id_is_the_directory_or_the_registry_name():
    assert model_id_of(ModelRef(path="/m/student", kind="adapter")) == "/m/student"
    assert model_id_of({"name": "tiny-test"}) == "tiny-test"


def test_load_student_policy_builds_a_sampling_policy(tiny_model_dir):
    settings = StudentSettings("alfworld", None, 5, 2, "conversation")
    policy = load_student_policy(
        {"name": tiny_model_dir}, {"dtype": "float32"}, {"seed": 7, "temperature": 0.5}, settings
    )
    assert isinstance(policy, StudentPolicy) and policy.settings is settings
    assert policy.model_id == tiny_model_dir
    assert policy.generator.sampling.seed == 7 and policy.generator.sampling.temperature == 0.5
    assert policy.generator.max_batch == settings.batch_size == 2  # one decode batch per step
    assert not any(p.requires_grad for p in policy.generator.model.parameters())
    episodes = [
        {
            "key": "g",
            "task": "open the box",
            "steps": [],
            "observation": "You see a box.",
            "candidates": ["open box 1", "look"],
        }
    ]
    (decision,) = policy.act(episodes)
    assert decision["action"] in episodes[0]["candidates"] or decision["repair"] != "exact"

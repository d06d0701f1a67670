import pytest

from leap_kalm.llm.parsing import (
    count_repairs,
    match_candidate,
    normalize_action,
    parse_answer,
    split_answer,
)

CANDIDATES = [
    "go to fridge 1",
    "open drawer 2",
    "move apple 1 to countertop 1",
    "look",
    "examine desk 1",
]


def test_clean_answer_is_exact():
    parsed = parse_answer("REASON:\nApples are cold.\nACTION:\ngo to fridge 1", CANDIDATES)
    assert (parsed.reason, parsed.action, parsed.repair, parsed.valid) == (
        "Apples are cold.",
        "go to fridge 1",
        "exact",
        True,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("**REASON:** check it\n**ACTION:** `Open Drawer 2.`", "open drawer 2"),
        ("Reason: x\nAction: > go to fridge 1", "go to fridge 1"),
        ("REASON:\nx\nACTION:\n- look\nREASON:\nrambling on", "look"),
        (
            "REASON:\nplace it\nACTION:\nput apple 1 in/on countertop 1",
            "move apple 1 to countertop 1",
        ),
        ('REASON: x\nACTION: "examine desk 1"', "examine desk 1"),
    ],
)
def test_sloppy_answers_are_normalized(text, expected):
    parsed = parse_answer(text, CANDIDATES)
    assert parsed.action == expected and parsed.repair == "normalized"


def test_near_miss_is_fuzzy_matched():
    parsed = parse_answer("REASON:\nx\nACTION:\ngo to the fridge 1", CANDIDATES)
    assert (
        parsed.action == "go to fridge 1" and parsed.repair == "fuzzy" and 80 <= parsed.score < 100
    )


def test_a_fuzzy_repair_never_changes_the_kind_of_action():
    """The learn profile's evaluation turned a repeated take into putting the object back,
    and clean into cool; a repair may fix a name or number only."""
    holding = ["move apple 1 to microwave 1", "close microwave 1", "go to countertop 1"]
    took = parse_answer("REASON:\nx\nACTION:\ntake apple 1 from microwave 1", holding)
    assert took.repair == "unmatched" and took.action == "take apple 1 from microwave 1"
    at_fridge = ["cool egg 1 with fridge 1", "close fridge 1", "go to sinkbasin 1"]
    clean = parse_answer("REASON:\nx\nACTION:\nclean egg 1 with fridge 1", at_fridge)
    assert clean.repair == "unmatched" and not clean.valid
    typo = parse_answer("REASON:\nx\nACTION:\ngo to sinkbasin 2", at_fridge)
    assert typo.repair == "fuzzy" and typo.action == "go to sinkbasin 1"
    page = ["click[< prev]", "click[buy now]", "search[<your query>]"]
    assert parse_answer("ACTION:\nclick[buy  nw]", page).action == "click[buy now]"
    assert parse_answer("ACTION:\nclock[buy now]", page).repair == "unmatched"


def test_action_verb():
    from leap_kalm.llm.parsing import action_verb

    assert [action_verb(a) for a in ("go to fridge 1", " Take x 1 from y 1", "click[< prev]",
                                     "search[red shoes]", "")] == ["go", "take", "click", "search", ""]  # fmt: skip


def test_truncated_id_equally_near_several_candidates_is_unmatched():
    # An answer cut by max_new_tokens used to be "repaired" onto the first listed product.
    products = ["click[back to search]", "click[g000000652]", "click[g000000736]"]
    cut = parse_answer("REASON:\nx\nACTION:\nclick[g00000", products)
    assert cut.repair == "unmatched" and cut.action == "click[g00000"
    nearer = parse_answer("REASON:\nx\nACTION:\nclick[g00000073", products)
    assert nearer.repair == "fuzzy" and nearer.action == "click[g000000736]"


def test_nonsense_is_unmatched_and_kept_raw():
    parsed = parse_answer("REASON:\nx\nACTION:\nfly to the moon", CANDIDATES)
    assert parsed.repair == "unmatched" and parsed.action == "fly to the moon" and not parsed.valid


def test_missing_markers_and_empty_action():
    assert split_answer("I think\ngo to fridge 1") == ("", "go to fridge 1")
    assert parse_answer("no markers at all\nopen drawer 2", CANDIDATES).action == "open drawer 2"
    empty = parse_answer("REASON:\nthinking but no action\nACTION:\n", CANDIDATES)
    assert empty.repair == "empty" and empty.reason == "thinking but no action"
    assert parse_answer("", CANDIDATES).repair == "empty"


def test_normalize_and_counts():
    assert normalize_action("  1. Put Mug 2 on Shelf 1. ") == "move mug 2 to shelf 1"
    answers = [parse_answer(t, CANDIDATES) for t in ("ACTION: look", "ACTION: LOOK", "ACTION: xyz")]
    assert count_repairs(answers) == {
        "exact": 1,
        "template": 0,
        "normalized": 1,
        "fuzzy": 0,
        "unmatched": 1,
        "empty": 0,
        "scored": 0,
    }
    assert match_candidate("look", []) == ("look", "unmatched", 0.0)


def test_a_filled_template_is_an_action_of_its_own():
    """WebShop lists `search[<query>]`: any filled-in query is admissible as written."""
    from leap_kalm.llm.parsing import fill_template, match_candidate

    candidates = ["search[<query>]"]
    assert match_candidate("search[red running shoes size 10]", candidates) == (
        "search[red running shoes size 10]", "template", 100.0
    )  # fmt: skip
    assert match_candidate("Search[mug]", candidates)[1] == "template"
    assert match_candidate("search[<query>]", candidates)[1] == "unmatched"
    for not_filled in ("search[<query>]", "search[]", "search[ ]", "click[buy now]"):
        assert fill_template(not_filled, candidates) is None, not_filled
    assert match_candidate("click[buy now]", ["click[buy now]", "search[<query>]"])[1] == "exact"
    from leap_kalm.llm.parsing import is_admissible

    assert is_admissible("search[mug]", candidates) and is_admissible("look", ["look"])
    assert not is_admissible("search[<query>]", candidates) and not is_admissible("fly", ["look"])

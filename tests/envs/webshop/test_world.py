"""WebShop's world surface: goals as games per LEAP split, the expert, the privileged state."""

from __future__ import annotations

import pytest

from leap_kalm.envs.webshop import world


@pytest.fixture(scope="module")
def games_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("webshop"))


def test_splits_index_the_shuffled_goals(games_dir):
    test = world.list_games("test", None, games_dir=games_dir)
    eval_ = world.list_games("eval", 5, games_dir=games_dir)
    train = world.list_games("train", 20, games_dir=games_dir)
    assert len(test) == 41 and len(eval_) == 5 and len(train) == 20
    assert [g["goal_index"] for g in eval_] == list(range(41, 46))
    assert {g["game_id"] for g in test}.isdisjoint(g["game_id"] for g in train)
    assert world.list_games("test", None, games_dir=games_dir) == test  # reused, same goals
    with pytest.raises(ValueError, match="splits"):
        world.list_games("valid_seen", 1, games_dir=games_dir)
    with pytest.raises(FileNotFoundError, match=r"WEBSHOP_DATA"):
        world.list_games("test", 1, source="real")


def test_the_expert_buys_the_goal_product_and_the_task_parses(games_dir):
    for game in world.list_games("train", 10, games_dir=games_dir):
        trajectory = world.run_expert(game, max_steps=15, seed=0)
        assert trajectory["success"] and trajectory["score"] == pytest.approx(1.0)
        first = trajectory["steps"][0]
        assert world.parse_task(first["observation"]) == trajectory["task"]
        assert (
            first["action"].startswith("search[")
            and trajectory["steps"][-1]["action"] == "click[buy now]"
        )
        assert all(
            s["action"] in s["candidate_actions"] or s["action"].startswith("search[")
            for s in trajectory["steps"]
        )


def test_item_reasons_check_the_pages_options_against_the_instruction(games_dir):
    """Every option click's and purchase's reason lists the option buttons the page shows,
    then those of them the instruction asks for, in page order, with their count against
    the number asked (``asked among them: 24 count, vanilla (2 of 2)``), the ones the page
    shows chosen, and then the decision: the next option asked for not chosen yet (the one
    clicked), or buying once all are chosen. An item lacking an option asked for is left
    with the same check and a short count."""
    import re

    n_options = n_buys = n_two = n_short = 0
    for game in world.list_games("train", 20, games_dir=games_dir):
        asked_all = list(
            dict.fromkeys(str(o).lower() for o in world.make_env(game, 15).goal["goal_options"])
        )
        for step in world.run_expert(game, max_steps=15, seed=0, searches="page")["steps"]:
            reason = step["reason"]
            short = re.fullmatch(
                r"This item (?:offers (.+)|has no options); asked among them: (.+) "
                r"\((\d+) of (\d+)\); back to the results\.",
                reason,
            )
            if short is not None:  # an item that lacks an option asked for
                n_short += 1
                offered = (short.group(1) or "").split(", ")
                among = [] if short.group(2) == "none" else short.group(2).split(", ")
                assert among == [o for o in dict.fromkeys(offered) if o in asked_all]
                assert int(short.group(3)) == len(among) < int(short.group(4)) == len(asked_all)
                assert step["action"] == "click[< prev]"
                continue
            match = re.fullmatch(
                r"This item offers (.+); asked among them: (.+) \((\d+) of (\d+)\); "
                r"chosen: (.+); (next (.+)|all chosen, so buy)\.",
                reason,
            )
            if match is None:
                assert not reason.startswith("This item offers") or "back to the" in reason, reason
                continue
            offered, asked = match.group(1).split(", "), match.group(2).split(", ")
            assert asked == [o for o in dict.fromkeys(offered) if o in asked_all]  # page order
            assert int(match.group(3)) == len(asked) == int(match.group(4)) == len(asked_all)
            shown = re.findall(r"\[button\] ([^\[]+?) \[button_\]", step["observation"])
            clicked = re.findall(
                r"\[clicked button\] ([^\[]+?) \[clicked button_\]", step["observation"]
            )
            assert set(offered) <= {b.lower() for b in shown + clicked}
            chosen = [] if match.group(5) == "none" else match.group(5).split(", ")
            assert set(chosen) == set(asked) & {c.lower() for c in clicked}
            n_two += len(asked) > 1
            if match.group(7) is not None:
                n_options += 1
                assert step["action"] == f"click[{match.group(7)}]"
                assert match.group(7) in asked and match.group(7) not in chosen
            else:
                n_buys += 1
                assert step["action"] == "click[buy now]" and sorted(chosen) == sorted(asked)
    assert n_options > 0 and n_buys > 0 and n_two > 0 and n_short > 0


def test_the_first_search_writes_out_the_options_asked_for_and_the_price_limit(games_dir):
    """Later reasons copy the options, their number and the limit from the student's own
    first reason."""
    for game in world.list_games("train", 10, games_dir=games_dir):
        env = world.make_env(game, 15)
        goal = env.goal
        trajectory = world.run_expert(game, max_steps=15, seed=0, searches="page")
        reason = trajectory["steps"][0]["reason"]
        asked = list(dict.fromkeys(str(o).lower() for o in goal["goal_options"]))
        options = f"{', '.join(asked) or 'no options'} ({len(asked)})"
        assert reason.endswith(f"; asked: {options}; price limit {goal['price_upper']:.2f}."), (
            reason
        )


def test_a_result_choice_walks_down_the_page_with_each_price_and_its_verdict(games_dir):
    """The page expert's reason for opening a result walks the page from the top to it:
    each result's shown price, at once followed by ``over`` or ``under`` the limit written
    first, then what else rules it out (opened already, ...), ending at the chosen result,
    under the limit. So the data hold prices called ``over`` as well as ``under``, and the
    verdict comes right after the price, before the choice."""
    import re

    walked = {"over": 0, "opened": 0, "first": 0}
    for game in world.list_games("train", 40, games_dir=games_dir):
        opened = []
        for step in world.run_expert(game, max_steps=15, seed=0, searches="page")["steps"]:
            rows = re.findall(
                r"\[button\] (G\d+) \[button_\] \[SEP\] ([^\[]+?) \[SEP\] "
                r"(\$[^\[]+?)(?: \[SEP\] |$)",
                step["observation"],
            )
            ids = [r[0].lower() for r in rows]
            chosen = step["action"][len("click[") : -1]
            if chosen not in ids:
                continue
            opened.append(chosen)
            match = re.fullmatch(r"Price limit ([\d.]+): (.+)\.", step["reason"])
            if match is None:  # the plan's reason, past the page expert's tries
                assert step["reason"].endswith("dollar limit."), step["reason"]
                continue
            limit, entries = float(match.group(1)), match.group(2).split("; ")
            position = ids.index(chosen)
            assert len(entries) == position + 1, (entries, ids[: position + 1])
            walked["first"] += position == 0
            for (asin, title, price), entry in zip(rows[: position + 1], entries, strict=True):
                over = max(float(p) for p in re.findall(r"[\d.]+", price)) > limit
                if asin.lower() == chosen:
                    assert not over
                    assert entry == f"{price} under, {title} names what the instruction asks for"
                elif over:
                    assert entry == f"{price} over"
                    walked["over"] += 1
                elif asin.lower() in opened[:-1]:
                    assert entry == f"{price} under, opened"
                    walked["opened"] += 1
                else:
                    assert entry.startswith(f"{price} under, "), entry
    assert walked["over"] >= 5 and walked["opened"] >= 5 and walked["first"] >= 5, walked


def test_the_privileged_state_names_the_target(games_dir):
    game = world.list_games("eval", 1, games_dir=games_dir)[0]
    state = world.privileged_state(game)
    env = world.make_env(game, 15)
    assert (
        state["asin"] == env.goal["asin"].lower() and state["attributes"] == env.goal["attributes"]
    )
    text = world.render_privileged(state)
    assert state["asin"] in text and "Price limit: $" in text


def test_the_page_reading_expert_chooses_from_what_the_pages_show(games_dir):
    """``searches: page`` opens a result by its shown price and title and goes back from an
    item lacking an option; it still buys something worth reward 1."""
    from leap_kalm.envs.webshop.env import parse_action
    from leap_kalm.envs.webshop.expert import expert_action

    games = world.list_games("train", 40, games_dir=games_dir)
    rewards, backs, other = [], 0, 0
    for game in games:
        env = world.make_env(game, 15)
        env.reset()
        for _ in range(15):
            action, reason = expert_action(env, "page")
            if env.page == "results" and parse_action(action)[1] in env._page_asins():
                product = env.shop.by_asin[parse_action(action)[1]]
                assert max(product["pricing"][:2]) <= env.goal["price_upper"]
                assert env.goal["query"] in product["Title"].lower()
                assert product["Title"] in reason and env.goal["asin"] not in reason
            if env.page == "item" and action == "click[< prev]" and env._sub is None:
                backs += 1
                assert "asked among them:" in reason or "over the" in reason
            _, reward, done, _, _ = env.step(action)
            if done:
                break
        rewards.append(reward)
        other += env._asin != env.goal["asin"].lower()
    assert sum(r == 1.0 for r in rewards) >= 36  # 90% of 40
    assert backs >= 5 and other >= 5  # it did go back, and bought products as good as the goal's
    trajectory = world.run_expert(games[0], max_steps=15, seed=0, searches="page")
    assert trajectory["score"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="searches must be one of"):
        world.run_expert(games[0], max_steps=15, seed=0, searches="oracle")

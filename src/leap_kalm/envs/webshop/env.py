"""A WebShop-compatible shop, in process and in pure Python: search, results, item pages.

Pages and actions follow WebShop's text environment:

* **search**: the instruction and a search bar; ``search[query]``.
* **results**: 10 products per page out of the top 50 (bm25s over title, description,
  features and attributes), ``click[next >]`` / ``click[< prev]``, ``click[<asin>]``,
  ``click[back to search]``.
* **item**: option values (``click[<value>]``, one per option name), ``click[description]``,
  ``click[features]``, ``click[reviews]`` (sub-pages left with ``click[< prev]``),
  ``click[< prev]`` (back to the results), ``click[back to search]`` and ``click[buy now]``,
  which ends the episode with WebShop's reward (``reward.get_reward``).

Observations are in WebShop's ``text_rich`` style: page parts joined by `` [SEP] ``, every
page opening with ``Instruction: [SEP] <instruction>`` as WebShop's page templates do,
clickables as ``[button] x [button_]`` (``[clicked button] x [clicked button_]`` for a
chosen option). An action that is not available changes nothing and scores 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from leap_kalm.envs.webshop.reward import get_reward
from leap_kalm.schemas import REWARD_PARTS

RESULTS_PER_PAGE = 10
TOP_K = 50
SEARCH_TEMPLATE = "search[<query>]"
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


def _fields_document(product: Mapping[str, Any]) -> str:
    """Title, description, every bullet point and the attributes (the issue's fields)."""
    return " ".join(
        [
            product["Title"],
            product["Description"],
            " ".join(product["BulletPoints"]),
            " ".join(product["Attributes"]),
        ]
    )


def _webshop_document(product: Mapping[str, Any]) -> str:
    """WebShop's own Lucene document: title, description, the first bullet point and the
    option text (``size: 2 pack, 3 pack, and scent: mint, coconut``), lower-cased."""
    options = ", and ".join(
        f"{name}: {', '.join(values)}" for name, values in product["options"].items()
    )
    first_bullet = product["BulletPoints"][0] if product["BulletPoints"] else ""
    return " ".join([product["Title"], product["Description"], first_bullet, options]).lower()


# What the search sees of a product. ``fields`` is the shop's default; ``webshop`` ranks the
# generated catalog's option-offering products first (docs/webshop.md, benchmarks/webshop_index.py).
INDEXES = {"fields": _fields_document, "webshop": _webshop_document}


class Shop:
    """The products, their prices and a bm25s index over their text (built once).

    Args:
        products: Products as ``catalog.load_products`` returns them.
        prices: The price of each asin.
        index: Which text of a product the search sees: one of ``INDEXES``.
    """

    def __init__(
        self, products: list[dict[str, Any]], prices: Mapping[str, float], index: str = "fields"
    ) -> None:
        import bm25s

        self.products = products
        self.by_asin = {p["asin"].lower(): p for p in products}
        self.prices = {k.lower(): float(v) for k, v in prices.items()}
        if index not in INDEXES:
            raise ValueError(f"webshop: index must be one of {sorted(INDEXES)}, got {index!r}")
        corpus = [INDEXES[index](p) for p in products]
        self._retriever = bm25s.BM25()
        self._retriever.index(
            bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False
        )

    def search(self, query: str, k: int = TOP_K) -> list[str]:
        """The asins (lower case) of the ``k`` best products for ``query``, best first."""
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        k = min(k, len(self.products))
        ids, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [
            self.products[int(i)]["asin"].lower()
            for i, s in zip(ids[0], scores[0], strict=True)
            if s > 0
        ]


def _button(text: str, clicked: bool = False) -> str:
    return f"[clicked button] {text} [clicked button_]" if clicked else f"[button] {text} [button_]"


def parse_action(action: str) -> tuple[str, str] | None:
    """``("search" | "click", argument in lower case)``, or ``None`` if it is neither."""
    match = _ACTION.match(action or "")
    return (match.group(1).lower(), match.group(2).strip().lower()) if match else None


@dataclass
class WebShopEnv:
    """One shopping episode towards ``goal`` (a goal from ``catalog.human_goals``).

    Attributes:
        shop: The shop.
        goal: The goal.
        max_steps: Actions before the episode is cut off (reward 0).
    """

    shop: Shop
    goal: dict[str, Any]
    max_steps: int = 15
    page: str = field(default="search", init=False)
    _query: str = field(default="", init=False)
    _results: list[str] = field(default_factory=list, init=False)
    _page_no: int = field(default=1, init=False)
    _asin: str | None = field(default=None, init=False)
    _options: dict[str, str] = field(default_factory=dict, init=False)
    _sub: str | None = field(default=None, init=False)
    _steps: int = field(default=0, init=False)
    _reward_parts: dict[str, float] = field(default_factory=dict, init=False)
    opened: list[str] = field(default_factory=list, init=False)  # items opened, in order

    # -- gymnasium-style interface ---------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self.page, self._query, self._results, self._page_no = "search", "", [], 1
        self._asin, self._options, self._sub, self._steps = None, {}, None, 0
        self._reward_parts, self.opened = {}, []
        return self.observation(), self._info(False, 0.0)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        reward, done = 0.0, False
        parsed = parse_action(action)
        if parsed is not None and self._available(parsed):
            reward, done = self._apply(*parsed)
        truncated = not done and self._steps >= self.max_steps
        if truncated:  # no purchase: every part of the reward is 0, as WebShop reports it
            self._reward_parts = dict.fromkeys(REWARD_PARTS, 0.0)
        return self.observation(), reward, done, truncated, self._info(done or truncated, reward)

    def close(self) -> None:
        pass

    # -- what can be done ------------------------------------------------------------------
    def clickables(self) -> list[str]:
        """The click targets of the current page, in page order (lower case)."""
        if self.page == "search":
            return []
        out = ["back to search"]
        if self.page == "results":
            if self._page_no > 1:
                out.append("< prev")
            if self._page_no * RESULTS_PER_PAGE < len(self._results):
                out.append("next >")
            return out + self._page_asins()
        out.append("< prev")
        if self.page == "item" and self._sub is None:
            for values in self._product()["options"].values():
                out += values
            out += ["description", "features", "reviews", "buy now"]
        return out

    def candidate_actions(self) -> list[str]:
        """The actions LEAP presents: the search template on the search page, else every click."""
        if self.page == "search":
            return [SEARCH_TEMPLATE]
        return [f"click[{c}]" for c in self.clickables()]

    def _available(self, parsed: tuple[str, str]) -> bool:
        kind, argument = parsed
        if kind == "search":
            return self.page == "search" and bool(argument) and argument != "<query>"
        return argument in self.clickables()

    # -- transitions -----------------------------------------------------------------------
    def _apply(self, kind: str, argument: str) -> tuple[float, bool]:
        if kind == "search":
            self._query, self._results, self._page_no = argument, self.shop.search(argument), 1
            self.page = "results"
        elif argument == "back to search":
            self.page, self._asin, self._options, self._sub = "search", None, {}, None
        elif argument == "next >":
            self._page_no += 1
        elif argument == "< prev":
            if self.page == "results":
                self._page_no -= 1
            elif self._sub is not None:
                self._sub = None
            else:
                self.page, self._asin, self._options = "results", None, {}
        elif self.page == "results":
            self.page, self._asin, self._options, self._sub = "item", argument, {}, None
            self.opened.append(argument)
        elif argument in ("description", "features", "reviews"):
            self._sub = argument
        elif argument == "buy now":
            return self.purchase_reward(), True
        else:
            for name, values in self._product()["options"].items():
                if argument in values:
                    self._options[name] = argument
                    break
        return 0.0, False

    def purchase_reward(self) -> float:
        """WebShop's reward for buying the open product with the chosen options now; its
        parts (``r_type``, ``r_att``, ``r_option``, ``r_price``) are kept for the step's info."""
        product = self._product()
        reward, parts = get_reward(
            product, self.goal, self.shop.prices[self._asin], dict(self._options), verbose=True
        )
        self._reward_parts = {k: float(parts[k]) for k in REWARD_PARTS if parts.get(k) is not None}
        return float(reward)

    # -- observations ----------------------------------------------------------------------
    def _product(self) -> dict[str, Any]:
        return self.shop.by_asin[self._asin]

    def _page_asins(self) -> list[str]:
        start = (self._page_no - 1) * RESULTS_PER_PAGE
        return self._results[start : start + RESULTS_PER_PAGE]

    def observation(self) -> str:
        # WebShop's templates show the instruction at the top of every page, not only the
        # search page (measured on the student: docs/results.md, nineteenth session)
        instruction = ["Instruction:", self.goal["instruction_text"]]
        if self.page == "search":
            parts = ["WebShop", *instruction, _button("Search")]
        elif self.page == "results":
            parts = [
                *instruction,
                _button("Back to Search"),
                f"Page {self._page_no} (Total results: {len(self._results)})",
            ]
            if self._page_no > 1:
                parts.append(_button("< Prev"))
            if self._page_no * RESULTS_PER_PAGE < len(self._results):
                parts.append(_button("Next >"))
            for asin in self._page_asins():
                product = self.shop.by_asin[asin]
                parts += [_button(product["asin"]), product["Title"], product["Price"]]
        elif self._sub is not None:
            product = self._product()
            text = {
                "description": product["Description"],
                "features": " [SEP] ".join(product["BulletPoints"]),
                "reviews": "No reviews yet.",
            }[self._sub]
            parts = [*instruction, _button("Back to Search"), _button("< Prev"), text]
        else:
            product = self._product()
            parts = [*instruction, _button("Back to Search"), _button("< Prev")]
            for name, values in product["options"].items():
                parts.append(name)
                parts += [_button(v, clicked=self._options.get(name) == v) for v in values]
            parts += [
                product["Title"],
                f"Price: {product['Price']}",
                "Rating: N.A.",
                _button("Description"),
                _button("Features"),
                _button("Reviews"),
                _button("Buy Now"),
            ]
        return " [SEP] ".join(parts)

    def _info(self, ended: bool, reward: float) -> dict[str, Any]:
        """``ended``: the episode is over (a purchase, or the step limit)."""
        info = {
            "task": self.goal["instruction_text"],
            "admissible_commands": self.candidate_actions() if not ended else [],
            "won": bool(ended and reward >= 1.0),
            "score": reward,
            "page": self.page,
        }
        if ended:
            info["reward_parts"] = dict(self._reward_parts)
        return info

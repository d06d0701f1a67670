"""OpenAI-compatible chat client with an on-disk cache, bounded concurrency and retries.

* Endpoint, model and sampling settings come from parameters; the API key from
  ``conf/local/credentials.yml`` (passed in by the node) or an environment variable.
  The key never enters the cache, the outputs or the logs.
* Every response is cached on disk under a hash of the full request (endpoint, model,
  messages, sampling settings), so re-running a pipeline makes no API call.
* 429s, 5xx responses, connection errors and timeouts are retried with exponential
  backoff by the ``openai`` library itself (``max_retries``, honouring Retry-After).
* Token usage and cost are accounted per client and returned with each result.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leap_kalm.schemas import ConfigMixin

logger = logging.getLogger(__name__)


@dataclass
class ClientParams(ConfigMixin):
    """Settings of an OpenAI-compatible endpoint.

    Attributes:
        base_url: e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``.
        model: Model name the server expects.
        api_key_env: Environment variable holding the key when credentials have none.
        temperature: Sampling temperature.
        max_tokens: Cap on completion tokens.
        timeout: Seconds per request.
        max_retries: Retries on 429/5xx/timeouts (exponential backoff in ``openai``).
        max_concurrency: Requests in flight at once in ``complete_many``.
        cache_dir: Where responses are cached (``None``: no cache).
        price_per_1k_prompt: Cost accounting, currency units per 1k prompt tokens.
        price_per_1k_completion: Likewise for completion tokens.
        response_format_json: Ask for a JSON object (``response_format``).
    """

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout: float = 120.0
    max_retries: int = 5
    max_concurrency: int = 4
    cache_dir: str | None = "data/02_intermediate/llm_cache"
    price_per_1k_prompt: float = 0.0
    price_per_1k_completion: float = 0.0
    response_format_json: bool = False


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    cost: float


@dataclass
class Usage:
    """Running totals of one client (safe to read from any thread)."""

    api_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, result: ChatResult) -> None:
        with self._lock:
            if result.cached:
                self.cache_hits += 1
                return
            self.api_calls += 1
            self.prompt_tokens += result.prompt_tokens
            self.completion_tokens += result.completion_tokens
            self.cost += result.cost

    def as_dict(self) -> dict[str, float]:
        return {
            k: getattr(self, k)
            for k in ("api_calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost")
        }


class APIKeyMissingError(RuntimeError):
    """No key in credentials or the environment for an endpoint that needs one."""


def resolve_api_key(params: ClientParams, credentials: dict[str, Any] | None = None) -> str:
    """Key from ``credentials['api_key']``, else ``$<api_key_env>``; loopback servers need none."""
    key = (credentials or {}).get("api_key") or os.environ.get(params.api_key_env)
    if key:
        return str(key)
    host = params.base_url.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    if host in {"127.0.0.1", "localhost", "::1", "[::1]"}:
        return "not-needed-for-a-local-server"
    raise APIKeyMissingError(
        f"no API key for {params.base_url}: put `api_key: ...` under the teacher's entry in "
        f"conf/local/credentials.yml, or export {params.api_key_env}"
    )


class ChatClient:
    """Chat completions against any OpenAI-compatible server, cached and retried."""

    def __init__(self, params: ClientParams, credentials: dict[str, Any] | None = None) -> None:
        from openai import OpenAI

        self.params = params
        self.usage = Usage()
        self._client = OpenAI(
            base_url=params.base_url,
            api_key=resolve_api_key(params, credentials),
            timeout=params.timeout,
            max_retries=params.max_retries,
        )
        self._cache = Path(params.cache_dir) if params.cache_dir else None

    def request_body(self, messages: list[dict[str, str]], **overrides: Any) -> dict[str, Any]:
        """The full request (without the key): what is sent, and what the cache is keyed on."""
        body: dict[str, Any] = {
            "model": self.params.model,
            "messages": messages,
            "temperature": overrides.get("temperature", self.params.temperature),
            "max_tokens": overrides.get("max_tokens", self.params.max_tokens),
        }
        if overrides.get("response_format_json", self.params.response_format_json):
            body["response_format"] = {"type": "json_object"}
        if overrides.get("seed") is not None:  # a retry: a new request, not the cached one
            body["seed"] = int(overrides["seed"])
        return body

    def cache_key(self, body: dict[str, Any]) -> str:
        payload = json.dumps(
            {"base_url": self.params.base_url, **body}, sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def _cache_path(self, key: str) -> Path | None:
        return self._cache / key[:2] / f"{key}.json" if self._cache else None

    def complete(self, messages: list[dict[str, str]], **overrides: Any) -> ChatResult:
        """One chat completion (from the cache when the same request was made before)."""
        body = self.request_body(messages, **overrides)
        path = self._cache_path(self.cache_key(body))
        if path is not None and path.exists():
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
                result = ChatResult(**{**stored, "cached": True})
                self.usage.add(result)
                return result
            except (json.JSONDecodeError, TypeError):
                logger.warning("ignoring unreadable cache entry %s", path)
        response = self._client.chat.completions.create(**body)
        text = response.choices[0].message.content or ""
        usage = response.usage
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = (
            prompt_tokens * self.params.price_per_1k_prompt
            + completion_tokens * self.params.price_per_1k_completion
        ) / 1000
        result = ChatResult(text, prompt_tokens, completion_tokens, False, cost)
        self.usage.add(result)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(
                json.dumps({k: v for k, v in result.__dict__.items() if k != "cached"}),
                encoding="utf-8",
            )
            os.replace(tmp, path)
        return result

    def complete_many(
        self, conversations: list[list[dict[str, str]]], **overrides: Any
    ) -> list[ChatResult]:
        """Many completions with at most ``max_concurrency`` requests in flight; order is kept."""
        with ThreadPoolExecutor(max_workers=max(1, self.params.max_concurrency)) as pool:
            return list(pool.map(lambda m: self.complete(m, **overrides), conversations))

"""The two clients: :class:`Client` (sync) and :class:`AsyncClient` (the same methods,
awaited). Each method sends the request :class:`~service.client.calls.Calls` builds and reads
the answer with :func:`~service.client.calls.parse`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self, overload

import httpx

from service.client.calls import (
    DEFAULT_URL,
    Call,
    Calls,
    headers,
    parse,
    unreachable,
    unwrap_predictions,
)
from service.client.shapes import (
    JSON,
    Accepted,
    DeadLetters,
    Example,
    FeedbackAccepted,
    History,
    Metrics,
    ModelInfo,
    ModelList,
    Prediction,
    VersionList,
)


class Client:
    """Synchronous client. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers(api_key), timeout=timeout, transport=transport
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, req: Call) -> JSON:
        try:
            response = self._http.request(req.method, req.path, **req.kwargs())
        except httpx.TransportError as e:
            raise unreachable(self.base_url, e) from e
        return parse(response, req.raw)

    # --- models ---------------------------------------------------------------------------
    def create_model(
        self, name: str, spec: Mapping[str, Any] | None = None, **fields: Any
    ) -> ModelInfo:
        """Create model ``name`` (or describe it, when the same spec exists already)."""
        return self._send(Calls.create_model(name, spec, fields))

    def get_model(self, name: str) -> ModelInfo:
        return self._send(Calls.get_model(name))

    def list_models(self) -> ModelList:
        return self._send(Calls.list_models())

    def delete_model(self, name: str) -> JSON:
        return self._send(Calls.delete_model(name))

    # --- data -----------------------------------------------------------------------------
    def learn(
        self,
        name: str,
        examples: Example | Sequence[Example],
        ids: Sequence[str] | None = None,
        *,
        wait: float | None = None,
    ) -> Accepted:
        """Post one example or a list; returns ``{"accepted": n, "duplicates": d}`` (and
        ``ids`` when given). Learning is asynchronous: with ``wait`` (seconds, at most 30)
        the answer comes once a version covering these examples is served, with that
        ``version`` (no ``version`` if the time ran out first)."""
        return self._send(Calls.learn(name, examples, ids, wait))

    def learn_raw(
        self, name: str, data: bytes | str, fmt: str = "ndjson", *, wait: float | None = None
    ) -> Accepted:
        """Post an NDJSON or svmlight body as it is (``wait`` as in :meth:`learn`)."""
        return self._send(Calls.learn_raw(name, data, fmt, wait))

    @overload
    def predict(self, name: str, examples: Example, feedback: bool = True) -> Prediction: ...
    @overload
    def predict(
        self, name: str, examples: Sequence[Example], feedback: bool = True
    ) -> list[Prediction]: ...
    def predict(
        self, name: str, examples: Example | Sequence[Example], feedback: bool = True
    ) -> Prediction | list[Prediction]:
        """One example in, one answer out; a list in, a list out."""
        out = self._send(Calls.predict(name, examples, feedback))
        return unwrap_predictions(examples, out)

    def predict_text(self, name: str, text: str) -> Prediction:
        return self._send(Calls.predict_text(name, text))

    def feedback(self, name: str, prediction_id: str, label: Any) -> FeedbackAccepted:
        return self._send(Calls.feedback(name, prediction_id, label))

    # --- monitoring and versions ----------------------------------------------------------
    def metrics(self, name: str) -> Metrics:
        return self._send(Calls.get(name, "metrics"))

    def history(self, name: str) -> History:
        return self._send(Calls.get(name, "history"))

    def versions(self, name: str) -> VersionList:
        return self._send(Calls.get(name, "versions"))

    def version(self, name: str, version: int, fmt: str = "json") -> JSON:
        return self._send(Calls.version(name, version, fmt))

    def rollback(self, name: str, version: int) -> JSON:
        return self._send(Calls.set_version(name, "rollback", version))

    def pin(self, name: str, version: int) -> JSON:
        return self._send(Calls.set_version(name, "pin", version))

    def unpin(self, name: str) -> VersionList:
        """Release a pin: the served head follows the newest version again."""
        return self._send(Calls.unpin(name))

    def dead_letters(self, name: str, limit: int = 100) -> DeadLetters:
        """The newest dead letters (entries the worker could not learn), with the reasons."""
        return self._send(Calls.dead_letters(name, limit))

    def healthz(self) -> JSON:
        return self._send(Calls.probe("/healthz"))

    def readyz(self) -> JSON:
        return self._send(Calls.probe("/readyz"))


class AsyncClient:
    """Asynchronous client with the same methods as :class:`Client`, awaited."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers(api_key), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, req: Call) -> JSON:
        try:
            response = await self._http.request(req.method, req.path, **req.kwargs())
        except httpx.TransportError as e:
            raise unreachable(self.base_url, e) from e
        return parse(response, req.raw)

    async def create_model(
        self, name: str, spec: Mapping[str, Any] | None = None, **fields: Any
    ) -> ModelInfo:
        return await self._send(Calls.create_model(name, spec, fields))

    async def get_model(self, name: str) -> ModelInfo:
        return await self._send(Calls.get_model(name))

    async def list_models(self) -> ModelList:
        return await self._send(Calls.list_models())

    async def delete_model(self, name: str) -> JSON:
        return await self._send(Calls.delete_model(name))

    async def learn(
        self,
        name: str,
        examples: Example | Sequence[Example],
        ids: Sequence[str] | None = None,
        *,
        wait: float | None = None,
    ) -> Accepted:
        return await self._send(Calls.learn(name, examples, ids, wait))

    async def learn_raw(
        self, name: str, data: bytes | str, fmt: str = "ndjson", *, wait: float | None = None
    ) -> Accepted:
        return await self._send(Calls.learn_raw(name, data, fmt, wait))

    @overload
    async def predict(self, name: str, examples: Example, feedback: bool = True) -> Prediction: ...
    @overload
    async def predict(
        self, name: str, examples: Sequence[Example], feedback: bool = True
    ) -> list[Prediction]: ...
    async def predict(
        self, name: str, examples: Example | Sequence[Example], feedback: bool = True
    ) -> Prediction | list[Prediction]:
        out = await self._send(Calls.predict(name, examples, feedback))
        return unwrap_predictions(examples, out)

    async def predict_text(self, name: str, text: str) -> Prediction:
        return await self._send(Calls.predict_text(name, text))

    async def feedback(self, name: str, prediction_id: str, label: Any) -> FeedbackAccepted:
        return await self._send(Calls.feedback(name, prediction_id, label))

    async def metrics(self, name: str) -> Metrics:
        return await self._send(Calls.get(name, "metrics"))

    async def history(self, name: str) -> History:
        return await self._send(Calls.get(name, "history"))

    async def versions(self, name: str) -> VersionList:
        return await self._send(Calls.get(name, "versions"))

    async def version(self, name: str, version: int, fmt: str = "json") -> JSON:
        return await self._send(Calls.version(name, version, fmt))

    async def rollback(self, name: str, version: int) -> JSON:
        return await self._send(Calls.set_version(name, "rollback", version))

    async def pin(self, name: str, version: int) -> JSON:
        return await self._send(Calls.set_version(name, "pin", version))

    async def unpin(self, name: str) -> VersionList:
        return await self._send(Calls.unpin(name))

    async def dead_letters(self, name: str, limit: int = 100) -> DeadLetters:
        return await self._send(Calls.dead_letters(name, limit))

    async def healthz(self) -> JSON:
        return await self._send(Calls.probe("/healthz"))

    async def readyz(self) -> JSON:
        return await self._send(Calls.probe("/readyz"))

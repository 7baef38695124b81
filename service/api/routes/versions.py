"""Versions: list, one version's metadata and weights (JSON or .npy), rollback and pin."""

from __future__ import annotations

import io
from typing import Annotated, Any, Literal

import numpy as np
import orjson
from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from service.api.deps import Admin, BackendDep, CacheDep, Read
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import VersionDetail, VersionList, VersionRef
from service.learning.linear import LinearModel

router = APIRouter(prefix="/models", tags=["versions"])

NPY = {"content": {"application/octet-stream": {}}, "description": "format=npy: the weights"}


def weights_json(model: LinearModel) -> dict[str, Any]:
    W = np.asarray(model.W)
    flat = W.ravel()
    nz = np.flatnonzero(flat)
    b = model.b
    bias: float | list[float] = np.asarray(b).tolist() if np.ndim(b) else float(b)
    return {
        "shape": list(W.shape),
        "indices": nz.tolist(),
        "values": flat[nz].tolist(),
        "bias": bias,
        "link": model.link,
    }


@router.get("/{m}/versions", response_model=VersionList, responses=ERRORS, dependencies=[Read])
async def list_versions(m: ModelName, backend: BackendDep) -> FastJSON:
    """List the retained versions (newest first) and the head."""
    head, versions = await backend.versions(m)
    return FastJSON({"head": head, "versions": versions})


@router.get(
    "/{m}/versions/{n}",
    response_model=VersionDetail,
    responses={**ERRORS, 200: {"content": {"application/octet-stream": {}}}},
    dependencies=[Read],
)
async def get_version(
    m: ModelName,
    n: Annotated[int, Path(ge=1, le=2**53)],
    backend: BackendDep,
    format: Annotated[Literal["json", "npy"], Query()] = "json",
) -> Response:
    """One version: metadata and weights (JSON: non-zeros; npy: the dense weight array)."""
    meta, model = await backend.version(m, n)
    if format == "npy":
        buf = io.BytesIO()
        np.save(buf, np.asarray(model.W), allow_pickle=False)
        bias = np.asarray(model.b).tolist() if np.ndim(model.b) else float(model.b)
        return Response(
            buf.getvalue(),
            media_type="application/octet-stream",
            headers={
                "Content-Disposition": f'attachment; filename="{m}-v{n}.npy"',
                "X-Version": str(n),
                "X-Bias": orjson.dumps(bias).decode(),
                "X-Link": model.link,
            },
        )
    return FastJSON({**meta, "weights": weights_json(model)})


@router.post("/{m}/rollback", response_model=VersionList, responses=ERRORS, dependencies=[Admin])
async def rollback(
    m: ModelName, body: VersionRef, backend: BackendDep, cache: CacheDep
) -> FastJSON:
    """Roll back to version k: a new version equal to k; the learner restarts from it."""
    await backend.rollback(m, body.version)
    await cache.refresh(m)
    head, versions = await backend.versions(m)
    return FastJSON({"head": head, "versions": versions})


@router.post("/{m}/pin", response_model=VersionList, responses=ERRORS, dependencies=[Admin])
async def pin(m: ModelName, body: VersionRef, backend: BackendDep, cache: CacheDep) -> FastJSON:
    """Pin the head to version k: predictions use it until unpinned; learning goes on."""
    await backend.pin(m, body.version)
    await cache.refresh(m)
    head, versions = await backend.versions(m)
    return FastJSON({"head": head, "versions": versions})


@router.delete("/{m}/pin", response_model=VersionList, responses=ERRORS, dependencies=[Admin])
async def unpin(m: ModelName, backend: BackendDep, cache: CacheDep) -> FastJSON:
    """Unpin: the head follows the newest version again."""
    await backend.unpin(m)
    await cache.refresh(m)
    head, versions = await backend.versions(m)
    return FastJSON({"head": head, "versions": versions})

# streamlearn: one image for the API and the workers (docker-compose.yml runs both from it).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    STREAMLEARN_HOST=0.0.0.0 \
    STREAMLEARN_PORT=8000

WORKDIR /app

# Dependencies and the package, from the project's own metadata (numpy, numba, mmh3 and
# hiredis ship manylinux wheels, so no compiler is needed in a slim image).
COPY pyproject.toml README.md ./
COPY service ./service
COPY workers ./workers
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home --home-dir /app streamlearn

# Never run as root.
USER streamlearn

EXPOSE 8000
# `streamlearn api` by default; compose runs `streamlearn worker` from the same image.
CMD ["streamlearn", "api"]

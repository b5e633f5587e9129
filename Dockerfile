# syntax=docker/dockerfile:1
# The Lakegate image: `lakegate-service` (default command) and `lakegate-sidecar`, both from the same
# Python package, with Java 17 and the pinned Delta + hadoop-aws jars for the service's Spark.
#   docker build -t ghcr.io/lakegate/lakegate:0.1.0 .
#   docker run --rm -p 8080:8080 ghcr.io/lakegate/lakegate:0.1.0 lakegate-service --config /etc/lakegate/service.yaml
# The Helm chart (charts/lakegate) runs it as uid/gid LAKEGATE_UID with a read-only root file system.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG LAKEGATE_UID=10001

# --- jars: the pinned Delta and hadoop-aws jars from Maven Central, Lakegate's log store built ---------
# scripts/fetch-jars is the same command developers and CI run: it makes a throw-away virtualenv
# with the package (its `test` extra, for lakegate_stack.artifacts) and runs Maven once per group.
FROM ${PYTHON_IMAGE} AS jars
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ENV LAKEGATE_JARS_DIR=/opt/lakegate/jars \
    LAKEGATE_VENV=/tmp/fetch-venv
RUN --mount=type=cache,target=/root/.m2 --mount=type=cache,target=/root/.cache/pip \
    scripts/fetch-jars delta log-store hadoop-aws iceberg iceberg-commit \
 && ls /opt/lakegate/jars/delta /opt/lakegate/jars/log-store /opt/lakegate/jars/hadoop-aws

# --- runtime ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ARG LAKEGATE_UID
# procps: pyspark's load-spark-env.sh calls ps.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid "${LAKEGATE_UID}" lakegate \
 && useradd --system --uid "${LAKEGATE_UID}" --gid "${LAKEGATE_UID}" --home-dir /home/lakegate \
      --create-home --shell /usr/sbin/nologin lakegate

# The package with the service and sidecar extras, in its own virtualenv (no source tree kept).
# The local test stack (lakegate_stack/) stays out of the image: only the jars stage above uses it.
WORKDIR /opt/lakegate/src
COPY pyproject.toml setup.cfg README.md ./
COPY lakegate_core ./lakegate_core
COPY commit_service ./commit_service
COPY sidecar ./sidecar
RUN python -m venv /opt/lakegate/venv \
 && /opt/lakegate/venv/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/lakegate/venv/bin/pip install --no-cache-dir ".[service,sidecar]" \
 && cd / && rm -rf /opt/lakegate/src

COPY --from=jars /opt/lakegate/jars /opt/lakegate/jars

ENV PATH=/opt/lakegate/venv/bin:$PATH \
    LAKEGATE_JARS_DIR=/opt/lakegate/jars \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /home/lakegate
USER ${LAKEGATE_UID}:${LAKEGATE_UID}
# http (API, probes, /metrics), Spark UI, sidecar /healthz + /metrics
EXPOSE 8080 4040 9464
# No ENTRYPOINT: the chart runs `lakegate-service --config ...` or `lakegate-sidecar --config ...`.
CMD ["lakegate-service"]

# signoff agent — build from the repository root: docker build -f deploy/docker/agent.Dockerfile .
# Stage 1 installs the pinned third-party requirements (with hashes) and then the workspace's
# packages with --no-deps; stage 2 copies only the virtual environment and runs as a non-root user.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/signoff
COPY requirements/requirements.txt /src/requirements/requirements.txt
RUN /opt/signoff/bin/pip install --require-hashes -r /src/requirements/requirements.txt
COPY shared /src/shared
COPY cli /src/cli
COPY examples /src/examples
COPY services /src/services
RUN /opt/signoff/bin/pip install --no-deps \
      /src/shared/contracts /src/shared/runtime /src/shared/conformance /src/cli \
      /src/examples/card_provider /src/examples/club /src/examples/scripted_model \
      /src/services/proposals /src/services/executor /src/services/reconciler /src/services/agent

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin signoff
COPY --from=build /opt/signoff /opt/signoff
ENV PATH=/opt/signoff/bin:$PATH PYTHONUNBUFFERED=1
USER 10001
EXPOSE 8001
HEALTHCHECK --interval=10s --timeout=3s --retries=6 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8001/healthz', timeout=2)"]
CMD ["signoff", "serve", "agent"]

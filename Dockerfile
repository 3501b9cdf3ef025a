# syntax=docker/dockerfile:1
# The neardup image: the binary on a slim Debian base, run as a non-root user.
#
#   docker build -t neardup:0.1.0 .                      # compiles inside the image
#   buildah bud --target prebuilt -f Dockerfile CONTEXT  # a binary built outside (CI)
#
# The base images are build arguments (BUILDER, BASE), so the file builds unchanged where a
# registry is reachable and against local copies where none is (scripts/check-image.sh).
# The Helm chart (helm/neardup) runs the image with a read-only root filesystem as uid
# 10001; the index lives on a volume and /tmp is an emptyDir.

ARG BUILDER=rust:1.95-slim-bookworm
ARG BASE=debian:bookworm-slim

FROM ${BUILDER} AS build
# RocksDB: bindgen needs libclang, the library itself a C++ compiler and make/cmake.
# librdkafka: OpenSSL (TLS, SASL SCRAM) and zlib, found through pkg-config.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libclang-dev g++ make cmake pkg-config libssl-dev libcurl4-openssl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The registry and the target directory are build caches: a rebuild after a source change
# recompiles neardup only, not RocksDB and librdkafka.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin neardup \
 && install -D -m 0755 target/release/neardup /out/neardup

# The runtime: the shared libraries the binary links (OpenSSL, zlib, the C++ runtime) and the
# user the chart runs as.
FROM ${BASE} AS base
# The in-memory lists of a large index are gigabytes read at random, a hundred and more
# lookups a page; on 4 KiB pages nearly every lookup also misses the TLB. This makes the C
# library's allocator ask for transparent huge pages (where the kernel's THP mode is
# `madvise` or `always`; docs/operations.md, huge pages). The binary sets it for
# itself when it is absent, by starting itself again; set here, that second start is spared.
# The two thresholds keep a page's HTML buffer in the heap, reused page after page, rather
# than mapped and zeroed afresh for each (src/allocator.rs). A decider, shard or aggregator
# starts once more from this value with one heap for all its threads, on huge pages.
ENV GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 libcurl4 zlib1g libstdc++6 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 neardup \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/neardup --no-create-home \
      --shell /usr/sbin/nologin neardup \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/neardup

# A binary built outside the image, placed in the build context as ./neardup (CI copies the
# one its tests ran).
FROM base AS prebuilt
COPY --chmod=0755 neardup /usr/local/bin/neardup
USER 10001:10001
WORKDIR /var/lib/neardup
# /metrics, /healthz and /readyz of `neardup run`.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/neardup"]
CMD ["--help"]

# The default target: the binary compiled above.
FROM base AS runtime
COPY --from=build /out/neardup /usr/local/bin/neardup
USER 10001:10001
WORKDIR /var/lib/neardup
# /metrics, /healthz and /readyz of `neardup run`.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/neardup"]
CMD ["--help"]

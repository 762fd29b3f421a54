# The nodewright image: `docker build -t nodewright:dev .`
# FEATURES=aws (the default) builds in the AWS provider; `--build-arg FEATURES=` leaves it out
# for a quicker image that runs only `--cloud-provider sim`.
FROM rust:1-bookworm AS build
ARG FEATURES=aws
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p nodewright-cli ${FEATURES:+--features ${FEATURES}} \
    && install -m 0755 target/release/nodewright /usr/local/bin/nodewright

# glibc and libgcc only; no shell. Runs as the distroless "nonroot" user (65532), which the
# chart's securityContext also asks for.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/nodewright /usr/local/bin/nodewright
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nodewright"]

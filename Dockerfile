# The sortase binary and its Python package, built from this clone:
#   docker build -t sortase .
#   docker run --rm -v "$PWD:/data" -w /data sortase sortase sort --write-index -o sorted.bam in.bam
#   docker run --rm sortase python -c 'import sortase; print(sortase.__version__)'
# The build stage runs the two install commands of docs/install.md; the image keeps the binary and
# a virtual environment with the package (and pyarrow), nothing else.
FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake curl nasm autoconf automake libtool python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo install --locked --no-track --path . --root /opt/sortase
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir .

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/sortase/bin/sortase /usr/local/bin/sortase
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
CMD ["sortase", "--help"]

# syntax=docker/dockerfile:1
#
# kvrouter: one image for the router (`serve`, the default) and the simulated vLLM worker
# (`sim-worker`). Build: docker build -t kvrouter .
#
#   docker run -p 8080:8080 -v $PWD/my-config.yaml:/etc/kvrouter/config.yaml:ro kvrouter
#   docker run kvrouter sim-worker --host 0.0.0.0 --port 8000 --events-port 5557
#
# Configuration: the YAML file named by KVROUTER_CONFIG (/etc/kvrouter/config.yaml; the
# image ships config/image.yaml there: listen on 0.0.0.0, which needs a token —
# KVROUTER_SERVER_AUTH_TOKEN — or mount your own file over it) and KVROUTER_* variables,
# which take precedence over the file (see docs/configuration.md).
#
# Node: kvrouter supports 20.19+ (package.json engines). The default base stays on 20, the
# version this image is built and smoke-tested with; Node 20 is out of maintenance since
# April 2026, so for production build on a maintained LTS line:
#   docker build --build-arg NODE_VERSION=22 -t kvrouter .      (or 24)
# With podman/buildah add `--format docker`: the default OCI format drops HEALTHCHECK.
ARG NODE_VERSION=20

# ---- build: dev dependencies, TypeScript → dist/ ----
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies and the compiled code only ----
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# config/default.yaml is also read relative to dist/ when no file is named.
COPY config ./config
# The trace slice `kvrouter replay` reads by default (traces/README.md).
COPY traces ./traces
COPY config/image.yaml /etc/kvrouter/config.yaml
# Inside a container the router must listen on all interfaces to be reachable: the
# image's file says host 0.0.0.0 (not an ENV, so a mounted file keeps its own host).
ENV KVROUTER_CONFIG=/etc/kvrouter/config.yaml
USER node
EXPOSE 8080
# `kvrouter healthcheck` reads the router's configuration (the file, KVROUTER_*), so the
# probe follows KVROUTER_SERVER_PORT or server.port; a port given only as a `--port` flag
# of `serve` is not seen (use the variable or the file). sim-worker containers set
# HEALTHCHECK_URL to their /health instead. Node does the request (slim images have no curl).
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["node", "dist/cli.js", "healthcheck"]
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve"]

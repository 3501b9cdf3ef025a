{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "neardup.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of the objects: fullnameOverride, or release-name (the release name alone when it
already contains the name). Truncated to 63 characters (DNS labels).
*/}}
{{- define "neardup.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "neardup.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Selector labels (stable for the life of the release).
*/}}
{{- define "neardup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "neardup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Standard labels of every object.
*/}}
{{- define "neardup.labels" -}}
helm.sh/chart: {{ include "neardup.chart" . }}
{{ include "neardup.selectorLabels" . }}
app.kubernetes.io/version: {{ include "neardup.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: neardup
{{- end -}}

{{/*
Selector labels of the stage pods.
*/}}
{{- define "neardup.stageSelectorLabels" -}}
{{ include "neardup.selectorLabels" . }}
app.kubernetes.io/component: stage
{{- end -}}

{{/*
Selector labels of the signer pods (scale-out).
*/}}
{{- define "neardup.signerSelectorLabels" -}}
{{ include "neardup.selectorLabels" . }}
app.kubernetes.io/component: signer
{{- end -}}

{{/*
Names of the shards', the aggregator's and the signers' workloads (scale-out), and of their
Services and PodDisruptionBudgets (and the signers' HorizontalPodAutoscaler). A StatefulSet's name is at most 52 characters: its pods
carry a label of the name and an 11-character revision hash, and a label value is at most 63.
*/}}
{{- define "neardup.shardName" -}}
{{- printf "%s-shard" (include "neardup.fullname" . | trunc 46 | trimSuffix "-") -}}
{{- end -}}
{{- define "neardup.aggregatorName" -}}
{{- printf "%s-aggregator" (include "neardup.fullname" . | trunc 41 | trimSuffix "-") -}}
{{- end -}}
{{- define "neardup.shardSelectorLabels" -}}
{{ include "neardup.selectorLabels" . }}
app.kubernetes.io/component: shard
{{- end -}}
{{- define "neardup.aggregatorSelectorLabels" -}}
{{ include "neardup.selectorLabels" . }}
app.kubernetes.io/component: aggregator
{{- end -}}

{{- define "neardup.signerName" -}}
{{- printf "%s-signer" (include "neardup.fullname" . | trunc 45 | trimSuffix "-") -}}
{{- end -}}

{{/*
Name of the ServiceAccount of the pods.
*/}}
{{- define "neardup.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "neardup.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Image tag and reference.
*/}}
{{- define "neardup.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}
{{- define "neardup.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "neardup.imageTag" .) -}}
{{- end -}}

{{/*
Name of the StatefulSet: at most 52 characters, as its pods carry a controller-revision-hash
label of the name plus 11 characters.
*/}}
{{- define "neardup.statefulSetName" -}}
{{- include "neardup.fullname" . | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/*
Names of the headless (governing) Service and of the ConfigMap.
*/}}
{{- define "neardup.headlessName" -}}
{{- printf "%s-headless" (include "neardup.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}
{{- define "neardup.configMapName" -}}
{{- printf "%s-config" (include "neardup.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}

{{/*
Paths inside the containers. The config, the credentials and the TLS material are mounted
side by side, never one inside another.
*/}}
{{- define "neardup.configDir" -}}/etc/neardup/config{{- end -}}
{{- define "neardup.configFile" -}}{{ include "neardup.configDir" . }}/neardup.toml{{- end -}}
{{- define "neardup.kafkaDir" -}}/etc/neardup/kafka{{- end -}}
{{- define "neardup.kafkaPropertiesFile" -}}{{ include "neardup.kafkaDir" . }}/kafka.properties{{- end -}}
{{- define "neardup.tlsDir" -}}/etc/neardup/tls{{- end -}}
{{- define "neardup.indexDir" -}}{{ trimSuffix "/" .Values.persistence.mountPath }}/index{{- end -}}

{{/*
Lines `key = value` of a TOML section from a map of camelCase keys. Null values, empty strings
and empty lists are left out (the binary's default applies). Values are written as JSON, which
is valid TOML for strings, numbers, booleans and lists of them.
*/}}
{{- define "neardup.tomlKeys" -}}
{{- range $k, $v := . }}
{{- $skip := kindIs "invalid" $v }}
{{- if kindIs "string" $v }}{{ $skip = eq $v "" }}{{ end }}
{{- if kindIs "slice" $v }}{{ $skip = eq (len $v) 0 }}{{ end }}
{{- if not $skip }}
{{ kebabcase $k }} = {{ toJson $v }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The Kafka client properties of the [kafka] section: the non-secret properties from values,
then the locations of the mounted TLS material.
*/}}
{{- define "neardup.kafkaProperties" -}}
{{- $props := list -}}
{{- range $k, $v := .Values.kafka.properties -}}
{{- if kindIs "string" $v -}}
{{- $props = append $props (printf "%s=%s" $k $v) -}}
{{- else -}}
{{- $props = append $props (printf "%s=%s" $k (toJson $v)) -}}
{{- end -}}
{{- end -}}
{{- with .Values.kafka.tls -}}
{{- if .existingSecret -}}
{{- if .caKey -}}
{{- $props = append $props (printf "ssl.ca.location=%s/ca.crt" (include "neardup.tlsDir" $)) -}}
{{- end -}}
{{- if .certKey -}}
{{- $props = append $props (printf "ssl.certificate.location=%s/tls.crt" (include "neardup.tlsDir" $)) -}}
{{- end -}}
{{- if .keyKey -}}
{{- $props = append $props (printf "ssl.key.location=%s/tls.key" (include "neardup.tlsDir" $)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $props -}}
{{- end -}}

{{/*
The config file of the stage and of the replay (the same TOML file the binary reads with
--config): role all, one process signing and deciding. Validated by
`neardup run --check-config` in scripts/check-helm.sh.
*/}}
{{- define "neardup.config" -}}
{{ include "neardup.roleConfig" (dict "root" . "role" "all") }}
{{- end -}}

{{/*
The config file of one role, from (dict "root" $ "role" ROLE): "all" (the single stage and
the replay: neardup.toml), "signer" or "decider" (scale-out: signer.toml, decider.toml). The
signers get no index and no [serve] (they keep no index); the decider no input topics (it
reads the signed topic) but the changelog. Each role has its own consumer group.
*/}}
{{- define "neardup.roleConfig" -}}
{{- $role := .role -}}
{{- with .root -}}
{{- $groups := dict "all" .Values.kafka.groupId "signer" .Values.scaleOut.signers.groupId "decider" .Values.scaleOut.decider.groupId "aggregator" .Values.kafka.groupId "shard" .Values.kafka.groupId -}}
{{- $sharded := or (eq $role "shard") (eq $role "aggregator") -}}
# neardup config{{ if eq $role "signer" }} of the signers{{ else if eq $role "decider" }} of the decider{{ else if eq $role "shard" }} of the shards{{ else if eq $role "aggregator" }} of the aggregator{{ end }}, rendered by the chart {{ include "neardup.chart" . }} from its values.
[signature]
{{- include "neardup.tomlKeys" (omit .Values.config.signature "stopwords") }}
{{- if .Values.config.signature.stopwords }}
stopwords-file = {{ printf "%s/stopwords.txt" (include "neardup.configDir" .) | toJson }}
{{- end }}

[detect]
{{- include "neardup.tomlKeys" .Values.config.detect }}
{{- if and .Values.sizing.capPages (not $sharded) }}
max-pages = {{ int64 .Values.sizing.uniquePages }}
{{- end }}

[kafka]
brokers = {{ .Values.kafka.brokers | toJson }}
group-id = {{ get $groups $role | toJson }}
{{- if and (ne $role "decider") (not $sharded) }}
input-topics = {{ .Values.kafka.inputTopics | toJson }}
{{- end }}
unique-topic = {{ .Values.kafka.uniqueTopic | toJson }}
duplicate-topic = {{ .Values.kafka.duplicateTopic | toJson }}
dead-letter-topic = {{ .Values.kafka.deadLetterTopic | toJson }}
{{- if ne $role "all" }}
signed-topic = {{ .Values.kafka.signedTopic | toJson }}
{{- end }}
{{- if eq $role "decider" }}
changelog-topic = {{ .Values.kafka.changelogTopic | toJson }}
{{- end }}
{{- if $sharded }}
votes-topic = {{ .Values.kafka.votesTopic | toJson }}
{{- end }}
guarantee = {{ .Values.kafka.guarantee | toJson }}
transaction-interval = {{ .Values.kafka.transactionInterval | toJson }}
{{- $props := include "neardup.kafkaProperties" . | fromJsonArray }}
{{- if $props }}
kafka-property = [
{{- range $props }}
  {{ toJson . }},
{{- end }}
]
{{- end }}
{{- if .Values.kafka.existingSecret }}
kafka-properties-file = {{ include "neardup.kafkaPropertiesFile" . | toJson }}
{{- end }}

[stage]
{{- if ne $role "all" }}
role = {{ $role | toJson }}
{{- end }}
{{- if ne $role "signer" }}
index = {{ include "neardup.indexDir" . | toJson }}
{{- end }}
{{- if $sharded }}
shards = {{ int .Values.scaleOut.shards }}
{{- end }}
{{- if or (and (eq $role "decider") .Values.scaleOut.decider.standby) (and (eq $role "shard") .Values.scaleOut.shard.standby) (and (eq $role "aggregator") .Values.scaleOut.aggregator.standby) }}
standby = true
{{- end }}
listen = {{ printf "0.0.0.0:%d" (int .Values.containerPort) | toJson }}
grace-period = {{ printf "%ds" (int .Values.gracePeriodSeconds) | toJson }}
{{- include "neardup.tomlKeys" (omit .Values.config.stage "jobs") }}
{{- if gt (int .Values.config.stage.jobs) 0 }}
jobs = {{ int .Values.config.stage.jobs }}
{{- end }}
{{- if and (ne $role "signer") (not $sharded) }}

[serve]
{{- include "neardup.tomlKeys" .Values.config.serve }}
{{- end }}
{{ end -}}
{{- end -}}

{{/*
Path of a role's config file in the container: neardup.toml for role all, signer.toml and
decider.toml in scale-out.
*/}}
{{- define "neardup.roleConfigFile" -}}
{{- printf "%s/%s.toml" (include "neardup.configDir" .root) (eq .role "all" | ternary "neardup" .role) -}}
{{- end -}}

{{/*
The data of the ConfigMap: neardup.toml (the single stage, the replay), in scale-out
signer.toml and decider.toml, and the stopwords.
*/}}
{{- define "neardup.configMapData" -}}
neardup.toml: |
  {{- regexReplaceAll "(?m)^ +$" (include "neardup.config" . | nindent 2) "" }}
{{- if .Values.scaleOut.enabled }}
{{- range $role := gt (int .Values.scaleOut.shards) 0 | ternary (list "signer" "shard" "aggregator") (list "signer" "decider") }}
{{ $role }}.toml: |
  {{- regexReplaceAll "(?m)^ +$" (include "neardup.roleConfig" (dict "root" $ "role" $role) | nindent 2) "" }}
{{- end }}
{{- end }}
{{- with .Values.config.signature.stopwords }}
stopwords.txt: |
  {{- range . }}
  {{ . }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
Checksum of what a role's pods read from the ConfigMap, for the annotation that rolls them on
a change: the whole ConfigMap for role all (as before scale-out), the role's own file and the
stopwords otherwise (a change of the signers' settings does not restart the decider).
*/}}
{{- define "neardup.configChecksum" -}}
{{- if eq .role "all" -}}
{{- include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum -}}
{{- else -}}
{{- list (include "neardup.roleConfig" .) .root.Values.config.signature.stopwords | toJson | sha256sum -}}
{{- end -}}
{{- end -}}

{{/*
Volumes of the config, the credentials and the TLS material, shared by the stage and the
replay pods. Secret volumes list their items, so only the named keys are mounted.
*/}}
{{- define "neardup.configVolumes" -}}
- name: config
  configMap:
    name: {{ include "neardup.configMapName" . }}
{{ include "neardup.secretVolumes" . }}
{{- end -}}

{{/*
The writable /tmp and the Secret volumes (without the config), for neardup.configVolumes and
the topics Job, which mounts a ConfigMap of its own.
*/}}
{{- define "neardup.secretVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- with include "neardup.kafkaSecretVolumes" . | trim }}
{{ . }}
{{- end }}
{{- end -}}

{{/*
The Secret volumes of the Kafka credentials and TLS material.
*/}}
{{- define "neardup.kafkaSecretVolumes" -}}
{{- if .Values.kafka.existingSecret }}
- name: kafka-credentials
  secret:
    secretName: {{ .Values.kafka.existingSecret }}
    defaultMode: 288 # 0440: owner and group (fsGroup) read
    items:
      - key: {{ .Values.kafka.existingSecretKey }}
        path: kafka.properties
{{- end }}
{{- with .Values.kafka.tls }}
{{- if .existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288 # 0440: owner and group (fsGroup) read
    items:
      {{- if .caKey }}
      - key: {{ .caKey }}
        path: ca.crt
      {{- end }}
      {{- if .certKey }}
      - key: {{ .certKey }}
        path: tls.crt
      {{- end }}
      {{- if .keyKey }}
      - key: {{ .keyKey }}
        path: tls.key
      {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "neardup.configMounts" -}}
- name: config
  mountPath: {{ include "neardup.configDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.kafka.existingSecret }}
- name: kafka-credentials
  mountPath: {{ include "neardup.kafkaDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: {{ include "neardup.tlsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/*
Checks of values the schema cannot express.
*/}}
{{- define "neardup.validate" -}}
{{- with .Values.kafka.tls -}}
{{- if and .existingSecret (not (or .caKey .certKey .keyKey)) -}}
{{- fail "kafka.tls.existingSecret is set but none of kafka.tls.caKey, certKey, keyKey" -}}
{{- end -}}
{{- if ne (empty .certKey) (empty .keyKey) -}}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (mutual TLS needs both)" -}}
{{- end -}}
{{- if .existingSecret -}}
{{- range $key := list "ssl.ca.location" "ssl.certificate.location" "ssl.key.location" -}}
{{- if hasKey $.Values.kafka.properties $key -}}
{{- fail (printf "kafka.properties.%s is set by the chart from kafka.tls: leave it out" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $out := list .Values.kafka.uniqueTopic .Values.kafka.duplicateTopic .Values.kafka.deadLetterTopic -}}
{{- if has $out $.Values.kafka.inputTopics -}}
{{- fail (printf "output topic %s is also in kafka.inputTopics: the stage would read its own output" $out) -}}
{{- end -}}
{{- end -}}
{{- with .Values.replay -}}
{{- if .enabled -}}
{{- $inputs := default $.Values.kafka.inputTopics .inputTopics -}}
{{- range $out := list (default $.Values.kafka.uniqueTopic .uniqueTopic) (default $.Values.kafka.duplicateTopic .duplicateTopic) (default $.Values.kafka.deadLetterTopic .deadLetterTopic) -}}
{{- if has $out $inputs -}}
{{- fail (printf "replay output topic %s is also a replay input topic" $out) -}}
{{- end -}}
{{- end -}}
{{- if regexMatch "^[a-zA-Z0-9._-]+:[0-9]+:[0-9]+(,[a-zA-Z0-9._-]+:[0-9]+:[0-9]+)*$" .start -}}
{{- range $part := splitList "," .start -}}
{{- $topic := first (splitList ":" $part) -}}
{{- if not (has $topic $inputs) -}}
{{- fail (printf "replay.start names topic %s, which is not a replay input topic" $topic) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.replay.enabled (eq .Values.replay.groupId .Values.kafka.groupId) -}}
{{- fail "replay.groupId must differ from kafka.groupId: a replay must not move the stage's offsets" -}}
{{- end -}}
{{- with .Values.scaleOut -}}
{{- if and (gt (int .shards) 0) (not .enabled) -}}
{{- fail "scaleOut.shards splits the decider of scale-out: set scaleOut.enabled too (the shards read the signers' signed topic)" -}}
{{- end -}}
{{- if .enabled -}}
{{- if eq .signers.groupId .decider.groupId -}}
{{- fail "scaleOut.signers.groupId and scaleOut.decider.groupId must differ: the signers consume the input topics and the decider the signed topic, each in a group of its own" -}}
{{- end -}}
{{- $kafka := $.Values.kafka -}}
{{- if has $kafka.signedTopic $kafka.inputTopics -}}
{{- fail (printf "kafka.signedTopic %s is also in kafka.inputTopics: the signers would read their own output" $kafka.signedTopic) -}}
{{- end -}}
{{- if has $kafka.changelogTopic $kafka.inputTopics -}}
{{- fail (printf "kafka.changelogTopic %s is also in kafka.inputTopics" $kafka.changelogTopic) -}}
{{- end -}}
{{- if eq $kafka.signedTopic $kafka.changelogTopic -}}
{{- fail "kafka.signedTopic and kafka.changelogTopic must differ" -}}
{{- end -}}
{{- range $out := list $kafka.uniqueTopic $kafka.duplicateTopic $kafka.deadLetterTopic -}}
{{- if eq $out $kafka.signedTopic -}}
{{- fail (printf "kafka.signedTopic %s is also an output topic" $out) -}}
{{- end -}}
{{- if eq $out $kafka.changelogTopic -}}
{{- fail (printf "kafka.changelogTopic %s is also an output topic: the changelog needs a topic of its own" $out) -}}
{{- end -}}
{{- end -}}
{{- if gt (int .shards) 0 -}}
{{- if has $kafka.votesTopic (list $kafka.signedTopic $kafka.uniqueTopic $kafka.duplicateTopic $kafka.deadLetterTopic) -}}
{{- fail (printf "kafka.votesTopic %s is also another topic of the stage: give it its own" $kafka.votesTopic) -}}
{{- end -}}
{{- if has $kafka.votesTopic $kafka.inputTopics -}}
{{- fail (printf "kafka.votesTopic %s is also in kafka.inputTopics" $kafka.votesTopic) -}}
{{- end -}}
{{- if $.Values.config.detect.retention -}}
{{- fail "scaleOut.shards: a sharded decider keeps no retention window (config.detect.retention empty; sizing.capPages does not apply to it): a shard counts the software text of pages it does not hold, which a removal could not take back" -}}
{{- end -}}
{{- end -}}
{{- with .signers.autoscaling -}}
{{- if .enabled -}}
{{- if gt (int .minReplicas) (int .maxReplicas) -}}
{{- fail "scaleOut.signers.autoscaling.minReplicas must not exceed maxReplicas" -}}
{{- end -}}
{{- if not (dig "requests" "cpu" "" $.Values.scaleOut.signers.resources) -}}
{{- fail "scaleOut.signers.autoscaling scales on CPU utilization: set scaleOut.signers.resources.requests.cpu" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $.Values.replay -}}
{{- if .enabled -}}
{{- if has .groupId (list $.Values.scaleOut.signers.groupId $.Values.scaleOut.decider.groupId (printf "%s-aggregator" $.Values.kafka.groupId)) -}}
{{- fail "replay.groupId must differ from the signers' and the decider's groups: a replay must not move the stage's offsets" -}}
{{- end -}}
{{- if and (regexMatch (printf "^index-%s-[0-9]+$" (include "neardup.statefulSetName" $ | regexQuoteMeta)) .index.existingClaim) (not .dryRun) -}}
{{- fail "replay.index.existingClaim is the decider's claim: a replay writes no changelog, so the decider's index and its changelog would disagree (to rebuild the decider's index, delete its claim: it is restored from the changelog)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with .Values.replay -}}
{{- if and .enabled .dryRun .scratch.existingClaim (eq .scratch.existingClaim (include "neardup.replayClaimName" $)) -}}
{{- fail "replay.scratch.existingClaim is the replay's index claim: give the scratch directory a claim of its own" -}}
{{- end -}}
{{- end -}}
{{- with .Values.topics -}}
{{- if gt (int .minInsyncReplicas) (int .replicationFactor) -}}
{{- fail (printf "topics.minInsyncReplicas %d exceeds topics.replicationFactor %d: no write would ever be acknowledged" (int .minInsyncReplicas) (int .replicationFactor)) -}}
{{- end -}}
{{- end -}}
{{- with .Values.replay -}}
{{- if and .enabled (not .dryRun) (not .index.existingClaim) (not .intoLiveTopics) -}}
{{- $live := list $.Values.kafka.uniqueTopic $.Values.kafka.duplicateTopic -}}
{{- range $out := list (default $.Values.kafka.uniqueTopic .uniqueTopic) (default $.Values.kafka.duplicateTopic .duplicateTopic) -}}
{{- if has $out $live -}}
{{- fail (printf "replay would write the decisions of a new index (its own claim, replay.index.existingClaim empty) into the live output topic %s, where the indexer reads them as the stage's: give the replay its own replay.uniqueTopic and replay.duplicateTopic, make it a dry run, or set replay.intoLiveTopics: true to ask for it" $out) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Sizing (values: sizing). The memory of the index pod in MiB, rounded up:
memoryBaseMiB MiB + memoryPerPageBytes B × uniquePages.
*/}}
{{- define "neardup.sizing.memoryMiB" -}}
{{- $s := .Values.sizing -}}
{{- $bytes := add (mul (int64 $s.memoryBaseMiB) 1048576) (mul (int64 $s.memoryPerPageBytes) (int64 $s.uniquePages)) -}}
{{- div (add $bytes 1048575) 1048576 -}}
{{- end -}}

{{/*
The disk of an index in GiB, rounded up: diskBaseMiB MiB + diskPerPageBytes B × uniquePages.
*/}}
{{- define "neardup.sizing.diskGiB" -}}
{{- $s := .Values.sizing -}}
{{- $bytes := add (mul (int64 $s.diskBaseMiB) 1048576) (mul (int64 $s.diskPerPageBytes) (int64 $s.uniquePages)) -}}
{{- div (add $bytes 1073741823) 1073741824 -}}
{{- end -}}

{{/*
A claim's size from a value: the value, or when it is empty the disk of sizing.
*/}}
{{- define "neardup.sizing.claimSize" -}}
{{- if .size -}}
{{- .size -}}
{{- else -}}
{{- printf "%sGi" (include "neardup.sizing.diskGiB" .root) -}}
{{- end -}}
{{- end -}}

{{/*
Resources of a container that holds an index (the stage, the decider, the replay), from
(dict "root" $ "resources" RESOURCES): as given, and when they set no memory request and no
memory limit, both the memory of sizing (request equal to limit).
*/}}
{{- define "neardup.indexResources" -}}
{{- $r := deepCopy (.resources | default dict) -}}
{{- $req := get $r "requests" | default dict -}}
{{- $lim := get $r "limits" | default dict -}}
{{- if not (or (hasKey $req "memory") (hasKey $lim "memory")) -}}
{{- $mem := printf "%sMi" (include "neardup.sizing.memoryMiB" .root) -}}
{{- $_ := set $req "memory" $mem -}}
{{- $_ := set $lim "memory" $mem -}}
{{- $_ := set $r "requests" $req -}}
{{- $_ := set $r "limits" $lim -}}
{{- end -}}
{{- toYaml $r -}}
{{- end -}}

{{/*
Affinity of the StatefulSet's pods: the affinity value, and with a standby decider a pod
anti-affinity on the hostname between the decider pods (required or preferred, by
scaleOut.decider.antiAffinity), so that one node lost does not take both.
*/}}
{{- define "neardup.stageAffinity" -}}
{{- $a := deepCopy (.Values.affinity | default dict) -}}
{{- if and .Values.scaleOut.enabled .Values.scaleOut.decider.standby -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "neardup.stageSelectorLabels" . | fromYaml)) -}}
{{- $anti := get $a "podAntiAffinity" | default dict -}}
{{- if eq .Values.scaleOut.decider.antiAffinity "required" -}}
{{- $terms := get $anti "requiredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- $_ := set $anti "requiredDuringSchedulingIgnoredDuringExecution" (append $terms $term) -}}
{{- else -}}
{{- $terms := get $anti "preferredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- $_ := set $anti "preferredDuringSchedulingIgnoredDuringExecution" (append $terms (dict "weight" 100 "podAffinityTerm" $term)) -}}
{{- end -}}
{{- $_ := set $a "podAntiAffinity" $anti -}}
{{- end -}}
{{- toYaml $a -}}
{{- end -}}

{{/*
storageClassName of a claim from a value: empty leaves it out (the default class), "-" sets ""
(no class), anything else names the class.
*/}}
{{- define "neardup.storageClassName" -}}
{{- if eq . "-" -}}
storageClassName: ""
{{- else if . -}}
storageClassName: {{ . | quote }}
{{- end -}}
{{- end -}}

{{/*
Claim of the replay's index: the existing claim named in values, or the replay's own claim.
*/}}
{{- define "neardup.replayClaimName" -}}
{{- if .Values.replay.index.existingClaim -}}
{{- .Values.replay.index.existingClaim -}}
{{- else -}}
{{- printf "%s-replay-index" (include "neardup.fullname" . | trunc 50 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{/*
Spec of the replay Job: `neardup replay` with the stage's config file; the replay's own
settings come as NEARDUP_* variables, which take precedence over the file.
*/}}
{{- define "neardup.replayJobSpec" -}}
{{- with .Values.replay -}}
backoffLimit: {{ .backoffLimit }}
{{- if gt (int .activeDeadlineSeconds) 0 }}
activeDeadlineSeconds: {{ .activeDeadlineSeconds }}
{{- end }}
template:
  metadata:
    labels:
      {{- include "neardup.labels" $ | nindent 6 }}
      app.kubernetes.io/component: replay
  spec:
    restartPolicy: Never
    serviceAccountName: {{ include "neardup.serviceAccountName" $ }}
    automountServiceAccountToken: {{ $.Values.automountServiceAccountToken }}
    terminationGracePeriodSeconds: {{ add $.Values.gracePeriodSeconds $.Values.terminationExtraSeconds }}
    {{- with $.Values.imagePullSecrets }}
    imagePullSecrets:
      {{- range . }}
      - name: {{ . }}
      {{- end }}
    {{- end }}
    {{- with $.Values.priorityClassName }}
    priorityClassName: {{ . }}
    {{- end }}
    securityContext:
      {{- toYaml $.Values.podSecurityContext | nindent 6 }}
    containers:
      - name: neardup-replay
        image: {{ include "neardup.image" $ }}
        imagePullPolicy: {{ $.Values.image.pullPolicy }}
        args:
          - --config
          - {{ include "neardup.configFile" $ }}
          - replay
          {{- range .extraArgs }}
          - {{ . | quote }}
          {{- end }}
        env:
          - name: NEARDUP_GROUP_ID
            value: {{ .groupId | quote }}
          {{- with .inputTopics }}
          - name: NEARDUP_INPUT_TOPICS
            value: {{ join "," . | quote }}
          {{- end }}
          - name: NEARDUP_START
            value: {{ .start | quote }}
          - name: NEARDUP_DRY_RUN
            value: {{ .dryRun | toString | quote }}
          {{- with .uniqueTopic }}
          - name: NEARDUP_UNIQUE_TOPIC
            value: {{ . | quote }}
          {{- end }}
          {{- with .duplicateTopic }}
          - name: NEARDUP_DUPLICATE_TOPIC
            value: {{ . | quote }}
          {{- end }}
          {{- with .deadLetterTopic }}
          - name: NEARDUP_DEAD_LETTER_TOPIC
            value: {{ . | quote }}
          {{- end }}
          # No HTTP listener: nothing probes or scrapes a replay.
          - name: NEARDUP_LISTEN
            value: "off"
        resources:
          {{- include "neardup.indexResources" (dict "root" $ "resources" .resources) | nindent 10 }}
        securityContext:
          {{- toYaml $.Values.securityContext | nindent 10 }}
        volumeMounts:
          - name: index
            mountPath: {{ $.Values.persistence.mountPath }}
          {{- include "neardup.configMounts" $ | nindent 10 }}
    volumes:
      - name: index
        persistentVolumeClaim:
          claimName: {{ include "neardup.replayClaimName" $ }}
      - name: config
        configMap:
          name: {{ include "neardup.configMapName" $ }}
      {{- if .dryRun }}
      # A dry run decides against a scratch copy of the index in its temporary directory:
      # /tmp is a volume of its own, as large as an index.
      {{- if .scratch.existingClaim }}
      - name: tmp
        persistentVolumeClaim:
          claimName: {{ .scratch.existingClaim }}
      {{- else }}
      - name: tmp
        ephemeral:
          volumeClaimTemplate:
            metadata:
              labels:
                {{- include "neardup.selectorLabels" $ | nindent 16 }}
                app.kubernetes.io/component: replay
            spec:
              accessModes:
                - ReadWriteOnce
              {{- with include "neardup.storageClassName" .scratch.storageClass }}
              {{- . | nindent 14 }}
              {{- end }}
              resources:
                requests:
                  storage: {{ include "neardup.sizing.claimSize" (dict "root" $ "size" .scratch.size) }}
      {{- end }}
      {{- else }}
      - name: tmp
        emptyDir:
          sizeLimit: {{ $.Values.tmpSizeLimit }}
      {{- end }}
      {{- with include "neardup.kafkaSecretVolumes" $ | trim }}
      {{- . | nindent 6 }}
      {{- end }}
    {{- with $.Values.nodeSelector }}
    nodeSelector:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $.Values.tolerations }}
    tolerations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end -}}
{{- end -}}

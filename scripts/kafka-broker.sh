#!/usr/bin/env bash
# Runs one Apache Kafka broker in the foreground: a single node in KRaft mode (broker and
# controller in one process), its data, configuration and log in DIR, listening on
# 127.0.0.1 only. The broker tests start one this way for each test; scripts/local-broker.sh
# starts one in the background for benchmarks and manual runs. The jars come from
# `bash scripts/install-deps.sh` (see scripts/kafka/pom.xml for the version).
#
#   bash scripts/kafka-broker.sh DIR PORT CONTROLLER_PORT [SASL_SSL_PORT]
#
# With SASL_SSL_PORT, a second listener on that port requires TLS (DIR/server.pem and
# DIR/server.key: a certificate chain and an unencrypted PKCS#8 key) and SASL/SCRAM-SHA-512;
# the user NEARDUP_BROKER_USER with NEARDUP_BROKER_PASSWORD is created when DIR is first
# formatted. The plain listener on PORT stays open for the tests' own clients.
#
# Settings that differ from the broker's defaults, and why:
# - the internal topics (offsets, transactions, share state) have one replica and one
#   partition: there is one node, and transactions hang without min ISR 1 on one node;
# - group.initial.rebalance.delay.ms=0: a group's first member starts at once (the default
#   3 s delay only waits for more members to arrive);
# - auto.create.topics.enable=false: as in production, `neardup topics create` makes topics;
# - message.max.bytes 64 MiB: the stage's default largest input page (pages are HTML).
#
# A node of a cluster (the tests' three-node cluster) takes these variables, every node the
# same but its id: NEARDUP_BROKER_NODE_ID (default 1), NEARDUP_BROKER_VOTERS (the controller
# quorum, id@127.0.0.1:CONTROLLER_PORT,...; default this node alone), NEARDUP_BROKER_CLUSTER_ID
# (default drawn at random: the nodes of one cluster must share it) and
# NEARDUP_BROKER_REPLICAS (default 1): the replication factor of the internal topics and of
# topics created without one, with min.insync.replicas 2 from 3 replicas (a record is
# acknowledged once two replicas hold it, so one node lost loses nothing acknowledged), and
# leaders moved back to their preferred replica 10 s after a node returns (300 s by default:
# the tests want that move while pages arrive).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: bash scripts/kafka-broker.sh DIR PORT CONTROLLER_PORT [SASL_SSL_PORT]" >&2; exit 2; }
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
port="$2"
cport="$3"
sport="${4:-}"
here="$(cd "$(dirname "$0")" && pwd)"
libs="${NEARDUP_KAFKA_LIBS:-$HOME/.cache/neardup-kafka/$(sha256sum "$here/kafka/pom.xml" | cut -c1-16)/libs}"
[ -f "$libs/.complete" ] || { echo "no Kafka jars in $libs: run bash scripts/install-deps.sh" >&2; exit 1; }
command -v java >/dev/null || { echo "no java: run bash scripts/install-deps.sh" >&2; exit 1; }

listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
advertised="PLAINTEXT://127.0.0.1:$port"
protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
if [ -n "$sport" ]; then
  listeners="$listeners,SASL_SSL://127.0.0.1:$sport"
  advertised="$advertised,SASL_SSL://127.0.0.1:$sport"
  protocols="$protocols,SASL_SSL:SASL_SSL"
  cat "$dir/server.key" "$dir/server.pem" > "$dir/keystore.pem"
fi
node="${NEARDUP_BROKER_NODE_ID:-1}"
voters="${NEARDUP_BROKER_VOTERS:-$node@127.0.0.1:$cport}"
replicas="${NEARDUP_BROKER_REPLICAS:-1}"
min_isr=1
[ "$replicas" -ge 3 ] && min_isr=2
cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=$protocols
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
offsets.topic.replication.factor=$replicas
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
default.replication.factor=$replicas
min.insync.replicas=$min_isr
leader.imbalance.check.interval.seconds=$([ "$replicas" -ge 3 ] && echo 10 || echo 300)
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
message.max.bytes=67108864
replica.fetch.max.bytes=67108864
PROPS
if [ -n "$sport" ]; then
  cat >> "$dir/server.properties" <<PROPS
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$dir/keystore.pem
PROPS
fi
cat > "$dir/log4j2.properties" <<PROPS
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = $dir/broker.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
PROPS

java_opts=(-Xms256m -Xmx1g -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
  "-Dlog4j2.configurationFile=$dir/log4j2.properties" -cp "$libs/*")
if [ ! -f "$dir/data/meta.properties" ]; then
  # a cluster id is 16 random bytes in URL-safe base64 without padding; one that starts with
  # '-' (1 in 64) would be read by the format tool as an option, so another is drawn
  cluster="${NEARDUP_BROKER_CLUSTER_ID:--}"
  while [ "${cluster#-}" != "$cluster" ]; do
    cluster="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  scram=()
  if [ -n "$sport" ]; then
    scram=(--add-scram "SCRAM-SHA-512=[name=${NEARDUP_BROKER_USER:?},password=${NEARDUP_BROKER_PASSWORD:?}]")
  fi
  java "${java_opts[@]}" kafka.tools.StorageTool format --ignore-formatted -t "$cluster" \
    -c "$dir/server.properties" "${scram[@]}" > "$dir/format.log" 2>&1 \
    || { cat "$dir/format.log" >&2; exit 1; }
fi
exec java "${java_opts[@]}" kafka.Kafka "$dir/server.properties"

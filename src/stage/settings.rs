//! The stage's validated settings, built from the resolved configuration
//! ([`crate::config::Config`]: flags, `NEARDUP_*` variables and the file, laid over each
//! other once), with the stage's own defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::config::{
    default_jobs, Config, Guarantee, LogFormat, Role, DEFAULT_INDEX, DEFAULT_LISTEN,
    DEFAULT_MAX_RECORD_BYTES,
};

/// Client properties the stage sets itself: overriding them would break the delivery
/// guarantees, so they are refused.
pub const RESERVED_PROPERTIES: &[&str] = &[
    "bootstrap.servers",
    "group.id",
    "group.instance.id",
    "enable.auto.offset.store",
    "enable.idempotence",
    "acks",
    "request.required.acks",
    "transactional.id",
    "isolation.level",
];

/// Which command runs the stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// `neardup run`: a consumer group member, until stopped.
    Run,
    /// `neardup replay`: a bounded pass over a historical topic.
    Replay,
}

/// Where a replay starts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// The earliest retained offset of every partition.
    Earliest,
    /// The first record at or after this time (Unix milliseconds).
    Time(i64),
    /// Explicit offsets; partitions not named start at the earliest offset.
    Offsets(Vec<(String, i32, i64)>),
}

impl Start {
    /// Parses `earliest`, an RFC 3339 time, or `topic:partition:offset,…`.
    pub fn parse(s: &str) -> Result<Start> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("earliest") || s.is_empty() {
            return Ok(Start::Earliest);
        }
        if let Some(secs) = crate::record::parse_time(s) {
            if secs < 0 {
                bail!("start time {s} is before 1970");
            }
            return Ok(Start::Time(secs * 1000));
        }
        let mut offsets = Vec::new();
        for part in s.split(',') {
            let mut it = part.trim().rsplitn(3, ':');
            let (off, p, topic) = (it.next(), it.next(), it.next());
            let (Some(off), Some(p), Some(topic)) = (off, p, topic) else {
                bail!(
                    "invalid start {part:?}: use earliest, an RFC 3339 time such as \
                     2026-11-01T00:00:00Z, or topic:partition:offset[,…]"
                );
            };
            let p: i32 = p
                .parse()
                .with_context(|| format!("invalid partition in start {part:?}"))?;
            let off: i64 = off
                .parse()
                .with_context(|| format!("invalid offset in start {part:?}"))?;
            if p < 0 || off < 0 {
                bail!("invalid start {part:?}: partition and offset must be ≥ 0");
            }
            offsets.push((topic.to_string(), p, off));
        }
        Ok(Start::Offsets(offsets))
    }
}

/// How the stage is known to its consumer group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "membership", content = "instance-id")]
pub enum Membership {
    /// Static membership with this `group.instance.id` (given by flag, variable or file).
    Static(String),
    /// Static membership with an id generated once and kept in the index directory
    /// (`instance-id`), so that a restart on the same volume is the same member.
    Persisted,
    /// Dynamic membership: a restarted process is a new member; the group waits for the
    /// old member's session to time out (`session.timeout.ms`) before its partitions move.
    Dynamic,
}

/// Bootstrap brokers.
pub const DEFAULT_BROKERS: &str = "127.0.0.1:9092";
/// The topic the fetcher writes pages to.
pub const DEFAULT_INPUT_TOPIC: &str = "pages";
/// Unique and skipped records.
pub const DEFAULT_UNIQUE_TOPIC: &str = "pages-unique";
/// Duplicates.
pub const DEFAULT_DUPLICATE_TOPIC: &str = "pages-duplicate";
/// Dead letters.
pub const DEFAULT_DEAD_LETTER_TOPIC: &str = "pages-dead-letter";
/// Signed pages, from the signers to the decider.
pub const DEFAULT_SIGNED_TOPIC: &str = "pages-signed";
/// A sharded decider's votes, from the shards to the aggregator.
pub const DEFAULT_VOTES_TOPIC: &str = "pages-votes";
/// The decider's changelog (a decider's default; the single process has none unless named).
pub const DEFAULT_CHANGELOG_TOPIC: &str = "pages-index-changelog";
/// Drain time on a stop.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// How long a fatal error is reported before the process exits.
pub const DEFAULT_FAILURE_HOLD: Duration = Duration::from_secs(30);
/// Records consumed but not yet acknowledged, at most.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 512;

/// How long an exactly-once transaction collects outputs before it commits by default: at
/// 250 ms exactly-once cost under 5 % of the stage's throughput here, at 100 ms about 6 %
/// (docs/benchmarks/2026-11-27-exactly-once.md).
pub const DEFAULT_TRANSACTION_INTERVAL: Duration = Duration::from_millis(250);

/// The group session of a decider with a standby (`session.timeout.ms`, unless set): how long
/// the standby waits for a decider that stopped answering before it takes over. A restart of
/// the active decider that takes longer hands the index to the standby, which is warm.
pub const STANDBY_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The name of the file in the index directory that keeps a generated instance id.
pub const INSTANCE_ID_FILE: &str = "instance-id";

/// A `group.instance.id`: 1–249 of `[A-Za-z0-9._-]` (what the brokers accept in names).
pub fn valid_instance_id(id: &str) -> bool {
    valid_topic(id)
}

/// Everything `neardup run` and `neardup replay` need, validated.
#[derive(Clone, Debug, Serialize)]
pub struct StageSettings {
    /// The command.
    pub mode: Mode,
    /// What this process does: sign, decide, or both.
    pub role: Role,
    /// Bootstrap brokers.
    pub brokers: String,
    /// Consumer group.
    pub group_id: String,
    /// Group membership (`neardup run`; a replay assigns its partitions and has none).
    pub membership: Membership,
    /// Input topics.
    pub input_topics: Vec<String>,
    /// Output topic of unique and skipped records.
    pub unique_topic: String,
    /// Output topic of duplicates.
    pub duplicate_topic: String,
    /// Output topic of dead letters.
    pub dead_letter_topic: String,
    /// The internal topic of signed pages (a signer writes it, a decider reads it).
    pub signed_topic: String,
    /// The compacted topic of the index's mutations, if any (a decider, or all).
    pub changelog_topic: Option<String>,
    /// Client properties from flags, variables, the file and the properties file (in that
    /// order of precedence). Serialized with secret values redacted.
    #[serde(serialize_with = "redacted")]
    pub properties: BTreeMap<String, String>,
    /// Index directory.
    pub index: PathBuf,
    /// HTTP listener.
    pub listen: Option<SocketAddr>,
    /// Drain time on a stop signal.
    #[serde(serialize_with = "as_secs")]
    pub grace_period: Duration,
    /// How long the HTTP endpoints report a fatal error before the process exits.
    pub failure_hold: Duration,
    /// In-flight bound.
    pub max_in_flight: usize,
    /// Keep the stripped text in tagged records.
    pub keep_text: bool,
    /// Largest record.
    pub max_record_bytes: usize,
    /// Signing threads.
    pub jobs: usize,
    /// Log format.
    pub log_format: LogFormat,
    /// Index parameters.
    pub params: crate::index::IndexParams,
    /// Retention window.
    #[serde(serialize_with = "opt_secs")]
    pub retention: Option<Duration>,
    /// The most pages the index keeps.
    pub max_pages: Option<u64>,
    /// Replay start.
    pub start: Start,
    /// Replay without side effects.
    pub dry_run: bool,
    /// Limits of `/v1/group` and `/v1/explain`.
    pub serving: crate::serving::Limits,
    /// Limits of the HTTP server.
    pub http: crate::http::HttpLimits,
    /// At-least-once or exactly-once (transactions).
    pub guarantee: Guarantee,
    /// A replay whose file says exactly-once: it runs at-least-once (said at start).
    pub replay_at_least_once: bool,
    /// Exactly-once: how long a transaction collects outputs before it commits.
    #[serde(serialize_with = "as_secs")]
    pub transaction_interval: Duration,
    /// A decider with a standby: decide while this process holds the lease and the signed
    /// topic is assigned to it, else follow the changelog.
    pub standby: bool,
    /// A decider split by owned pages: the number of shards (0: not sharded).
    pub shards: usize,
    /// Which shard this process is (role shard).
    pub shard: usize,
    /// The votes topic of a sharded decider.
    pub votes_topic: String,
    /// When to stop: the handle [`super::run`] was given (not a configuration key).
    #[serde(skip)]
    pub(crate) shutdown: crate::shutdown::Shutdown,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Whether a client property holds a secret (its value is never logged or printed).
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "key.pem",
        "token",
        "jaas",
        "ssl.key",
        "credential",
    ]
    .iter()
    .any(|s| k.contains(s))
        && !k.ends_with(".location")
}

fn redacted<S: serde::Serializer>(p: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(p.len()))?;
    for (k, v) in p {
        if is_secret(k) {
            m.serialize_entry(k, "<redacted>")?;
        } else {
            m.serialize_entry(k, v)?;
        }
    }
    m.end()
}

/// A Kafka topic name: 1–249 of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn valid_topic(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 249
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

fn parse_property(kv: &str, origin: &str) -> Result<(String, String)> {
    let Some((k, v)) = kv.split_once('=') else {
        bail!("invalid client property in {origin}: expected KEY=VALUE");
    };
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
    {
        bail!("invalid client property name {k:?} in {origin}");
    }
    if RESERVED_PROPERTIES.contains(&k) {
        bail!(
            "client property {k} in {origin} is set by neardup itself and cannot be overridden \
             (use --brokers / --group-id / --instance-id for the servers, the group and the \
             member's identity)"
        );
    }
    Ok((k.to_string(), v.trim().to_string()))
}

impl StageSettings {
    /// The stage's settings of a command in `mode`, from the resolved configuration (its
    /// `kafka`, `stage` and `replay` groups carry the file's values under the flags),
    /// validated.
    pub fn resolve(mode: Mode, c: &Config) -> Result<StageSettings> {
        let (kafka, stage, replay) = (&c.kafka, &c.stage, &c.replay);
        let brokers = kafka
            .brokers
            .clone()
            .unwrap_or_else(|| DEFAULT_BROKERS.into());
        if brokers.split(',').any(|b| b.trim().is_empty()) {
            bail!("brokers must be host:port[,host:port…] (got {brokers:?})");
        }
        let role = stage.role.unwrap_or_default();
        if mode == Mode::Replay && role != Role::All {
            bail!(
                "role {} is for neardup run; a replay signs and decides in one process (role all)",
                role.as_str()
            );
        }
        // with a standby, shard K's two processes may be given as K and K + S (the pods K
        // and K + S of the chart's StatefulSet of 2S pods, which it rolls one at a time)
        let stage_shard = match (stage.shard, stage.shards) {
            (Some(k), Some(n))
                if stage.standby == Some(true) && n > 0 && (n..2 * n).contains(&k) =>
            {
                Some(k - n)
            }
            (k, _) => k,
        };
        let base = kafka.group_id.clone().unwrap_or_else(|| "neardup".into());
        let votes_name = kafka
            .votes_topic
            .clone()
            .unwrap_or_else(|| DEFAULT_VOTES_TOPIC.into());
        let group_id = match role {
            // every shard and the aggregator in a group of its own whatever group-id says (a
            // file shared by all roles names one): a shard's by its shard, the shard count and
            // the votes topic, so a new count or a new votes topic is new shards, which vote
            // from the start of the signed topic
            Role::Shard => Some(format!(
                "{base}-shard-{}-of-{}.{votes_name}",
                stage_shard.unwrap_or(0),
                stage.shards.unwrap_or(0)
            )),
            Role::Aggregator => Some(format!("{base}-aggregator")),
            _ => kafka.group_id.clone(),
        };
        let group_id = group_id.unwrap_or_else(|| match (mode, role) {
            (Mode::Replay, _) => "neardup-replay".into(),
            (Mode::Run, Role::All) => "neardup".into(),
            (Mode::Run, Role::Signer) => "neardup-signer".into(),
            (Mode::Run, Role::Decider) => "neardup-decider".into(),
            (Mode::Run, Role::Shard | Role::Aggregator) => unreachable!("named above"),
        });
        if group_id.len() > 249 {
            bail!("group {group_id:?} is over 249 characters: shorten group-id or votes-topic");
        }
        if group_id.trim().is_empty() {
            bail!("group-id must not be empty");
        }
        let membership = match kafka.instance_id.as_deref().map(str::trim) {
            // a signer keeps no directory to hold an id in; a shard and the aggregator read
            // by assignment, in no group's membership
            None if matches!(role, Role::Signer | Role::Shard | Role::Aggregator) => {
                Membership::Dynamic
            }
            None => Membership::Persisted,
            Some("off") => Membership::Dynamic,
            Some(id) if valid_instance_id(id) => Membership::Static(id.to_string()),
            Some(id) => bail!(
                "invalid instance-id {id:?}: 1–249 characters of A-Z a-z 0-9 . _ - (e.g. the pod \
                 name), or off for dynamic membership"
            ),
        };
        let signed_topic = kafka
            .signed_topic
            .clone()
            .unwrap_or_else(|| DEFAULT_SIGNED_TOPIC.into());
        // a signer keeps no index: the setting is the decider's (one file may serve both)
        let changelog_topic = match (kafka.changelog_topic.as_deref().map(str::trim), role) {
            (_, Role::Signer | Role::Shard | Role::Aggregator)
            | (Some("off"), _)
            | (None, Role::All) => None,
            (Some(t), _) => Some(t.to_string()),
            (None, Role::Decider) => Some(DEFAULT_CHANGELOG_TOPIC.into()),
        };
        let mut input_topics = kafka
            .input_topics
            .clone()
            .unwrap_or_else(|| vec![DEFAULT_INPUT_TOPIC.into()]);
        if matches!(role, Role::Decider | Role::Shard | Role::Aggregator) {
            // the decider reads what the signers wrote
            input_topics = vec![signed_topic.clone()];
        }
        let votes_topic = kafka
            .votes_topic
            .clone()
            .unwrap_or_else(|| DEFAULT_VOTES_TOPIC.into());
        let sharded = matches!(role, Role::Shard | Role::Aggregator);
        let shards = stage.shards.unwrap_or(0);
        let shard = stage_shard.unwrap_or(0);
        if sharded {
            if !(1..=1024).contains(&shards) {
                bail!(
                    "role {} needs shards, 1 to 1024: how many shards the decider is split in \
                     (every shard and the aggregator take the same number)",
                    role.as_str()
                );
            }
            if role == Role::Shard && stage_shard.is_none_or(|k| k >= shards) {
                bail!(
                    "role shard needs shard, 0 to {} (which of the {shards} shards this process \
                     is; with a standby also {shards} to {}, shard K + {shards} the other process \
                     of shard K)",
                    shards - 1,
                    2 * shards - 1
                );
            }
            if c.retention.is_some() || c.max_pages.is_some() {
                bail!(
                    "a sharded decider keeps no retention window or page cap: a shard counts \
                     the software text of pages it does not hold, which a removal could not \
                     take back"
                );
            }
        }
        let unique_topic = kafka
            .unique_topic
            .clone()
            .unwrap_or_else(|| DEFAULT_UNIQUE_TOPIC.into());
        let duplicate_topic = kafka
            .duplicate_topic
            .clone()
            .unwrap_or_else(|| DEFAULT_DUPLICATE_TOPIC.into());
        let dead_letter_topic = kafka
            .dead_letter_topic
            .clone()
            .unwrap_or_else(|| DEFAULT_DEAD_LETTER_TOPIC.into());
        if input_topics.is_empty() {
            bail!("input-topics must name at least one topic");
        }
        for t in input_topics
            .iter()
            .chain([
                &unique_topic,
                &duplicate_topic,
                &dead_letter_topic,
                &signed_topic,
                &votes_topic,
            ])
            .chain(changelog_topic.as_ref())
        {
            if !valid_topic(t) {
                bail!("invalid topic name {t:?}: 1–249 characters of A-Z a-z 0-9 . _ -");
            }
        }
        let outputs: Vec<&String> = match role {
            Role::Signer => vec![&signed_topic, &dead_letter_topic],
            Role::Shard => vec![&votes_topic],
            _ => [&unique_topic, &duplicate_topic, &dead_letter_topic]
                .into_iter()
                .chain(changelog_topic.as_ref())
                .collect(),
        };
        for out in outputs {
            if input_topics.contains(out) {
                bail!("output topic {out} is also an input topic: the stage would read its own output");
            }
        }
        if let Some(c) = &changelog_topic {
            if [
                &unique_topic,
                &duplicate_topic,
                &dead_letter_topic,
                &signed_topic,
            ]
            .contains(&c)
            {
                bail!("changelog-topic {c} is also another topic of the stage: give it its own");
            }
        }
        if sharded
            && [
                &unique_topic,
                &duplicate_topic,
                &dead_letter_topic,
                &signed_topic,
            ]
            .contains(&&votes_topic)
        {
            bail!("votes-topic {votes_topic} is also another topic of the stage: give it its own");
        }

        let mut properties = BTreeMap::new();
        if let Some(path) = &kafka.kafka_properties_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read kafka-properties-file {}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let origin = format!("{} line {}", path.display(), n + 1);
                let (k, v) = parse_property(line, &origin)?;
                properties.insert(k, v);
            }
        }
        for kv in kafka.kafka_property.iter().flatten() {
            if kv.trim().is_empty() {
                continue;
            }
            let (k, v) = parse_property(kv, "kafka-property")?;
            properties.insert(k, v);
        }

        check_sasl(&properties)?;

        let listen = match stage.listen.as_deref().map(str::trim) {
            Some("off") | Some("") => None,
            Some(a) => Some(
                a.parse::<SocketAddr>()
                    .with_context(|| format!("invalid listen address {a:?}: use IP:PORT or off"))?,
            ),
            None => match mode {
                Mode::Run => Some(DEFAULT_LISTEN.parse().expect("static address")),
                Mode::Replay => None,
            },
        };
        let max_in_flight = stage.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT);
        if max_in_flight == 0 {
            bail!("max-in-flight must be at least 1");
        }
        let jobs = stage.jobs.unwrap_or_else(default_jobs);
        if jobs == 0 {
            bail!("jobs must be at least 1");
        }
        let max_record_bytes = stage.max_record_bytes.unwrap_or(DEFAULT_MAX_RECORD_BYTES);
        if max_record_bytes == 0 {
            bail!("max-record-bytes must be at least 1");
        }
        let configured = kafka.guarantee.unwrap_or_default();
        // a replay is at-least-once whatever the file says: it starts from --start, not from
        // committed offsets, so a replay run again after a crash writes its outputs again.
        // The file a run and its replays share may say exactly-once (the stage's guarantee).
        let guarantee = if mode == Mode::Replay {
            Guarantee::AtLeastOnce
        } else {
            configured
        };
        let replay_at_least_once = mode == Mode::Replay && configured == Guarantee::ExactlyOnce;
        if guarantee == Guarantee::ExactlyOnce {
            // a transaction holds one group generation's records, and a revocation waits
            // for them to be committed: the eager protocol revokes every partition before a
            // generation changes, the incremental ones do not
            let incremental = properties
                .get("partition.assignment.strategy")
                .is_some_and(|v| v.contains("cooperative"))
                || properties
                    .get("group.protocol")
                    .is_some_and(|v| v.trim() == "consumer");
            if incremental {
                bail!(
                    "guarantee exactly-once needs the classic group protocol with an eager \
                     assignor (range or roundrobin): drop partition.assignment.strategy \
                     cooperative-sticky and group.protocol=consumer"
                );
            }
        }
        let transaction_interval = kafka
            .transaction_interval
            .unwrap_or(DEFAULT_TRANSACTION_INTERVAL);
        if transaction_interval.is_zero() || transaction_interval > Duration::from_secs(30) {
            bail!(
                "transaction-interval must be above 0 and at most 30s (got {:?})",
                transaction_interval
            );
        }
        // a replay decides in one process whatever the shared file says of a standby
        let standby = stage.standby.unwrap_or(false) && mode != Mode::Replay;
        if standby {
            let why = if !matches!(role, Role::Decider | Role::Shard | Role::Aggregator) {
                Some(
                    "is for --role decider, shard or aggregator (a signer keeps no state; a \
                      single process reads partitions two processes would share)",
                )
            } else if guarantee != Guarantee::ExactlyOnce {
                Some(
                    "needs --guarantee exactly-once: the standby fences the process it takes \
                      over from, with their shared transactional id",
                )
            } else if role == Role::Decider && changelog_topic.is_none() {
                Some("needs the changelog, which the standby follows")
            } else {
                None
            };
            if let Some(why) = why {
                bail!("standby {why}");
            }
        }
        let start = Start::parse(replay.start.as_deref().unwrap_or("earliest"))?;
        if let Start::Offsets(o) = &start {
            if let Some((t, _, _)) = o.iter().find(|(t, _, _)| !input_topics.contains(t)) {
                bail!("start names topic {t}, which is not an input topic");
            }
        }
        Ok(StageSettings {
            mode,
            role,
            brokers,
            group_id,
            membership,
            input_topics,
            unique_topic,
            duplicate_topic,
            dead_letter_topic,
            signed_topic,
            changelog_topic,
            properties,
            index: stage
                .index
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_INDEX)),
            listen,
            grace_period: stage.grace_period.unwrap_or(DEFAULT_GRACE_PERIOD),
            failure_hold: stage.failure_hold.unwrap_or(DEFAULT_FAILURE_HOLD),
            max_in_flight,
            keep_text: !stage.no_text.unwrap_or(false),
            max_record_bytes,
            jobs,
            log_format: stage.log_format.unwrap_or_default(),
            params: c.params.clone(),
            retention: c.retention,
            max_pages: c.max_pages,
            start,
            dry_run: replay.dry_run.unwrap_or(false),
            serving: c.serving.clone(),
            http: c.http,
            guarantee,
            replay_at_least_once,
            transaction_interval,
            standby,
            shards: if sharded { shards } else { 0 },
            shard,
            votes_topic,
            shutdown: crate::shutdown::Shutdown::new(),
        })
    }

    /// The settings as JSON, secret property values redacted.
    pub fn redacted_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The SASL mechanisms managed Kafka services use, as this build supports them: PLAIN,
/// SCRAM-SHA-256 and SCRAM-SHA-512 (over SASL_SSL), and OAUTHBEARER with OpenID Connect
/// (`sasl.oauthbearer.method=oidc`: the client fetches and refreshes its token itself, e.g.
/// from `sasl.oauthbearer.token.endpoint.url` with `sasl.oauthbearer.client.id` and
/// `sasl.oauthbearer.client.secret`, and checks the properties of its grant). Refused with
/// the reason: GSSAPI (Kerberos: this build
/// has no Kerberos library), and OAUTHBEARER without OIDC (its token would have to come
/// from the application, which has no way to take one; the unsecured test token is for
/// test brokers only, and accepted when asked for by name).
pub fn check_sasl(properties: &BTreeMap<String, String>) -> Result<()> {
    let get = |k: &str| properties.get(k).map(|v| v.trim());
    let Some(mechanism) = get("sasl.mechanism").or(get("sasl.mechanisms")) else {
        return Ok(());
    };
    match mechanism.to_ascii_uppercase().as_str() {
        "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => Ok(()),
        "OAUTHBEARER" => {
            let oidc =
                get("sasl.oauthbearer.method").is_some_and(|m| m.eq_ignore_ascii_case("oidc"));
            let unsecured = get("enable.sasl.oauthbearer.unsecure.jwt") == Some("true");
            if oidc || unsecured {
                // the client checks the properties of its grant (client credentials, a
                // signed assertion, a cloud's metadata service) when it is created
                Ok(())
            } else {
                bail!(
                    "sasl.mechanism OAUTHBEARER needs sasl.oauthbearer.method=oidc (with \
                     sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret and \
                     sasl.oauthbearer.token.endpoint.url, or another grant the client \
                     supports): neardup takes no token from outside the client"
                )
            }
        }
        "GSSAPI" => bail!(
            "sasl.mechanism GSSAPI (Kerberos) is not supported by this build: use PLAIN, \
             SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER with OIDC"
        ),
        other => bail!(
            "unknown sasl.mechanism {other}: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or \
             OAUTHBEARER with OIDC"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FileConfig, KafkaOptions, Options, ReplayOptions, StageOptions};

    fn config(kafka: KafkaOptions, stage: StageOptions, replay: ReplayOptions) -> Config {
        let o = Options {
            kafka,
            stage,
            replay,
            ..Default::default()
        };
        Config::resolve(o, &FileConfig::default()).unwrap()
    }

    fn resolve(k: KafkaOptions, s: StageOptions, r: ReplayOptions) -> Result<StageSettings> {
        StageSettings::resolve(Mode::Run, &config(k, s, r))
    }

    #[test]
    fn the_roles_of_a_sharded_decider_need_their_shard_count_and_no_retention() {
        let role = |role, shards, shard| StageOptions {
            role: Some(role),
            shards,
            shard,
            ..Default::default()
        };
        let s = resolve(
            Default::default(),
            role(Role::Shard, Some(4), Some(3)),
            Default::default(),
        )
        .unwrap();
        assert_eq!((s.shards, s.shard), (4, 3));
        assert_eq!(
            s.group_id, "neardup-shard-3-of-4.pages-votes",
            "a new count or votes topic is new shards"
        );
        assert_eq!(s.input_topics, vec!["pages-signed"]);
        assert_eq!(s.votes_topic, "pages-votes");
        assert!(s.changelog_topic.is_none());
        assert_eq!(s.membership, Membership::Dynamic, "read by assignment");
        let a = resolve(
            Default::default(),
            role(Role::Aggregator, Some(4), None),
            Default::default(),
        )
        .unwrap();
        assert_eq!(a.group_id, "neardup-aggregator");
        // a group-id shared by every role's file: each sharded role still gets its own
        let shared = KafkaOptions {
            group_id: Some("crawl".into()),
            ..Default::default()
        };
        let g = |r, shard| {
            resolve(shared.clone(), role(r, Some(2), shard), Default::default())
                .unwrap()
                .group_id
        };
        assert_eq!(g(Role::Shard, Some(0)), "crawl-shard-0-of-2.pages-votes");
        assert_eq!(g(Role::Shard, Some(1)), "crawl-shard-1-of-2.pages-votes");
        assert_eq!(g(Role::Aggregator, None), "crawl-aggregator");
        for (r, shards, shard, why) in [
            (Role::Shard, None, Some(0), "needs shards"),
            (Role::Shard, Some(2), None, "needs shard, 0 to 1"),
            (Role::Shard, Some(2), Some(2), "needs shard, 0 to 1"),
            (Role::Aggregator, Some(0), None, "needs shards"),
        ] {
            let e = resolve(
                Default::default(),
                role(r, shards, shard),
                Default::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(why), "{e}");
        }
        let kept = Options {
            stage: role(Role::Aggregator, Some(2), None),
            detect: crate::config::DetectOptions {
                retention: Some(Duration::from_secs(86_400)),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = StageSettings::resolve(
            Mode::Run,
            &Config::resolve(kept, &FileConfig::default()).unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no retention window"), "{e}");
        let clash = KafkaOptions {
            votes_topic: Some("pages-unique".into()),
            ..Default::default()
        };
        let e = resolve(
            clash,
            role(Role::Shard, Some(2), Some(0)),
            Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("votes-topic pages-unique is also"), "{e}");
        // the setting is the roles': a decider keeps none
        let d = resolve(
            Default::default(),
            role(Role::Decider, Some(2), None),
            Default::default(),
        )
        .unwrap();
        assert_eq!(d.shards, 0);
    }

    #[test]
    fn defaults_and_validation() {
        let s = resolve(Default::default(), Default::default(), Default::default()).unwrap();
        assert_eq!(s.input_topics, vec!["pages"]);
        assert_eq!(s.listen, Some("0.0.0.0:9464".parse().unwrap()));
        assert_eq!(s.start, Start::Earliest);
        let bad_topic = KafkaOptions {
            input_topics: Some(vec!["pa ges".into()]),
            ..Default::default()
        };
        assert!(resolve(bad_topic, Default::default(), Default::default()).is_err());
        let loop_topic = KafkaOptions {
            unique_topic: Some("pages".into()),
            ..Default::default()
        };
        let e = resolve(loop_topic, Default::default(), Default::default()).unwrap_err();
        assert!(e.to_string().contains("own output"), "{e}");
        let reserved = KafkaOptions {
            kafka_property: Some(vec!["enable.auto.offset.store=true".into()]),
            ..Default::default()
        };
        assert!(resolve(reserved, Default::default(), Default::default()).is_err());
        let reserved = KafkaOptions {
            kafka_property: Some(vec!["group.instance.id=x".into()]),
            ..Default::default()
        };
        let e = resolve(reserved, Default::default(), Default::default()).unwrap_err();
        assert!(e.to_string().contains("--instance-id"), "{e}");
        assert_eq!(s.membership, Membership::Persisted);
        let id = |v: &str| KafkaOptions {
            instance_id: Some(v.into()),
            ..Default::default()
        };
        let m =
            |v: &str| resolve(id(v), Default::default(), Default::default()).map(|s| s.membership);
        assert_eq!(
            m("neardup-0").unwrap(),
            Membership::Static("neardup-0".into())
        );
        assert_eq!(m("off").unwrap(), Membership::Dynamic);
        assert!(m("pod/0").is_err());
        let zero = StageOptions {
            max_in_flight: Some(0),
            ..Default::default()
        };
        assert!(resolve(Default::default(), zero, Default::default()).is_err());
    }

    #[test]
    fn secrets_are_redacted_and_files_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("client.properties");
        std::fs::write(
            &f,
            "# credentials\nsasl.username=crawler\nsasl.password=hunter2\n",
        )
        .unwrap();
        let k = KafkaOptions {
            kafka_property: Some(vec![
                "security.protocol=SASL_SSL".into(),
                "ssl.key.password=s3cret".into(),
                "ssl.ca.location=/etc/ca.pem".into(),
            ]),
            kafka_properties_file: Some(f),
            ..Default::default()
        };
        let s = resolve(k, Default::default(), Default::default()).unwrap();
        assert_eq!(s.properties["sasl.password"], "hunter2");
        let json = s.redacted_json();
        assert!(
            !json.contains("hunter2") && !json.contains("s3cret"),
            "{json}"
        );
        assert!(
            json.contains("crawler") && json.contains("/etc/ca.pem"),
            "{json}"
        );
    }

    #[test]
    fn a_standby_is_a_decider_with_exactly_once_and_a_changelog() {
        let decider = || StageOptions {
            role: Some(Role::Decider),
            standby: Some(true),
            ..Default::default()
        };
        let eos = || KafkaOptions {
            guarantee: Some(Guarantee::ExactlyOnce),
            ..Default::default()
        };
        let s = resolve(eos(), decider(), Default::default()).unwrap();
        assert!(s.standby);
        assert_eq!(
            super::super::membership::transactional_id(&s, Some("decider-1")),
            "neardup-decider.pages-index-changelog",
            "both deciders share one id"
        );
        let e = resolve(Default::default(), decider(), Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs --guarantee exactly-once"), "{e}");
        let all = StageOptions {
            standby: Some(true),
            ..Default::default()
        };
        let e = resolve(eos(), all, Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is for --role decider"), "{e}");
        // a shard or the aggregator with a standby: exactly-once, no changelog
        for role in [Role::Shard, Role::Aggregator] {
            let opts = || StageOptions {
                role: Some(role),
                standby: Some(true),
                shards: Some(2),
                shard: Some(1),
                ..Default::default()
            };
            let s = resolve(eos(), opts(), Default::default()).unwrap();
            assert!(s.standby && s.changelog_topic.is_none());
            if role == Role::Shard {
                // the other process of shard 1 of 2, given as 3 (the chart's pod 3)
                let other = StageOptions {
                    shard: Some(3),
                    ..opts()
                };
                let o = resolve(eos(), other, Default::default()).unwrap();
                assert_eq!((o.shard, &o.group_id), (1, &s.group_id));
                let four = StageOptions {
                    shard: Some(4),
                    ..opts()
                };
                let e = resolve(eos(), four, Default::default())
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("needs shard, 0 to 1"), "{e}");
                let alone = StageOptions {
                    shard: Some(3),
                    standby: None,
                    ..opts()
                };
                let e = resolve(eos(), alone, Default::default())
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("needs shard, 0 to 1"), "{e}");
            }
            let e = resolve(Default::default(), opts(), Default::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("needs --guarantee exactly-once"), "{e}");
        }
        let off = KafkaOptions {
            changelog_topic: Some("off".into()),
            ..eos()
        };
        let e = resolve(off, decider(), Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs the changelog"), "{e}");
        let s = resolve(
            eos(),
            StageOptions {
                role: Some(Role::Decider),
                ..Default::default()
            },
            Default::default(),
        )
        .unwrap();
        assert!(!s.standby, "off unless asked");
        // a replay reading a file a standby decider shares decides in one process
        let r = StageSettings::resolve(
            Mode::Replay,
            &config(
                eos(),
                StageOptions {
                    standby: Some(true),
                    ..Default::default()
                },
                Default::default(),
            ),
        )
        .unwrap();
        assert!(!r.standby && r.replay_at_least_once);
    }

    #[test]
    fn the_guarantee_is_at_least_once_unless_asked_and_the_interval_bounded() {
        let s = resolve(Default::default(), Default::default(), Default::default()).unwrap();
        assert_eq!(s.guarantee, Guarantee::AtLeastOnce);
        assert_eq!(s.transaction_interval, DEFAULT_TRANSACTION_INTERVAL);
        let k = KafkaOptions {
            guarantee: Some("exactly-once".parse().unwrap()),
            transaction_interval: Some(Duration::from_millis(250)),
            ..Default::default()
        };
        let s = resolve(k, Default::default(), Default::default()).unwrap();
        assert_eq!(s.guarantee, Guarantee::ExactlyOnce);
        assert_eq!(s.transaction_interval, Duration::from_millis(250));
        assert!("exactly_once".parse::<Guarantee>().is_err());
        let eos = || KafkaOptions {
            guarantee: Some(Guarantee::ExactlyOnce),
            ..Default::default()
        };
        // a replay reads the file a run shares and is at-least-once whatever it says
        let r = StageSettings::resolve(
            Mode::Replay,
            &config(eos(), Default::default(), Default::default()),
        )
        .unwrap();
        assert_eq!(r.guarantee, Guarantee::AtLeastOnce);
        assert!(r.replay_at_least_once);
        let k = KafkaOptions {
            kafka_property: Some(vec![
                "partition.assignment.strategy=cooperative-sticky".into()
            ]),
            ..eos()
        };
        let e = resolve(k, Default::default(), Default::default()).unwrap_err();
        assert!(e.to_string().contains("eager assignor"), "{e}");
        for bad in [Duration::ZERO, Duration::from_secs(31)] {
            let k = KafkaOptions {
                transaction_interval: Some(bad),
                ..Default::default()
            };
            let e = resolve(k, Default::default(), Default::default()).unwrap_err();
            assert!(e.to_string().contains("transaction-interval"), "{e}");
        }
    }

    #[test]
    fn start_positions() {
        assert_eq!(Start::parse("earliest").unwrap(), Start::Earliest);
        assert_eq!(
            Start::parse("2026-11-01T00:00:00Z").unwrap(),
            Start::Time(1_793_491_200_000)
        );
        assert_eq!(
            Start::parse("pages:0:10,pages:2:5").unwrap(),
            Start::Offsets(vec![("pages".into(), 0, 10), ("pages".into(), 2, 5)])
        );
        assert!(Start::parse("pages:x:1").is_err());
        assert!(Start::parse("yesterday").is_err());
    }

    #[test]
    fn sasl_mechanisms_of_managed_services_are_taken_and_the_others_refused_with_the_reason() {
        let props = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"] {
            check_sasl(&props(&[("sasl.mechanism", m)])).unwrap();
        }
        check_sasl(&props(&[])).unwrap();
        let oidc = [
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.client.id", "neardup"),
            ("sasl.oauthbearer.client.secret", "s3cret"),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://id.example/token",
            ),
        ];
        check_sasl(&props(&oidc)).unwrap();
        let e = check_sasl(&props(&oidc[..1])).unwrap_err().to_string();
        assert!(e.contains("sasl.oauthbearer.method=oidc"), "{e}");
        let e = check_sasl(&props(&[("sasl.mechanism", "GSSAPI")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Kerberos"), "{e}");
        let e = check_sasl(&props(&[("sasl.mechanisms", "MADE-UP")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown sasl.mechanism MADE-UP"), "{e}");
    }
}

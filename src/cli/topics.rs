//! `neardup topics create`: the topics the stage writes, with the settings its guarantees
//! need. The outputs (unique, duplicate, dead letters) get `--partitions`; the signed topic
//! and the changelog get one partition (their order is the decisions' order) and the
//! changelog `cleanup.policy=compact` (it must keep the latest state of every document, not
//! a time window). Every topic created gets `min.insync.replicas` (`--min-insync-replicas`,
//! default 2 from a replication factor of 3, else 1): with `acks=all` a record is then
//! acknowledged only once two replicas hold it, so one broker lost loses nothing
//! acknowledged. Topics that exist are left as they are (the summary shows their
//! `min.insync.replicas`, and a warning names those at 1 on a replicated cluster); an existing
//! changelog with more than one partition, or one that is not compacted, is an error. The
//! input topics are the crawler's and are not created.
//!
//! With `--shards S` (a decider split by owned pages) the votes topic is created too, with S
//! partitions, and the votes and signed topics keep every record (`retention.ms=-1`): the
//! shards and the aggregator read them from their start at every start.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rdkafka::admin::{AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;
use serde::Serialize;

use super::run::RunArgs;
use crate::config::{FileConfig, ReplayOptions};
use crate::stage::{kafka, Mode, StageSettings};

/// `neardup topics …`.
#[derive(Subcommand, Debug)]
pub enum TopicsCommand {
    /// Create the output, signed and changelog topics that do not exist yet, and check the
    /// changelog's settings; prints a JSON summary
    Create(CreateArgs),
}

/// Arguments of `neardup topics create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub run: RunArgs,
    /// Partitions of the output topics (unique, duplicate, dead letters)
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// Replication factor of every topic created
    #[arg(long, default_value_t = 3)]
    pub replication_factor: i32,
    /// min.insync.replicas of every topic created (default: 2 from a replication factor of
    /// 3, else 1): how many replicas must hold a record before it is acknowledged
    #[arg(long)]
    pub min_insync_replicas: Option<i32>,
}

/// The default `min.insync.replicas` for a replication factor: 2 from 3 replicas (one broker
/// may be lost, and writes go on with one away), else 1 (2 of 2 would stop writes whenever
/// one broker is away).
pub fn default_min_insync(replication_factor: i32) -> i32 {
    if replication_factor >= 3 {
        2
    } else {
        1
    }
}

/// One topic of the summary.
#[derive(Debug, Serialize)]
struct TopicState {
    topic: String,
    /// created, or exists.
    state: &'static str,
    partitions: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    cleanup_policy: Option<String>,
    /// The topic's min.insync.replicas (set when created, read when it exists).
    #[serde(skip_serializing_if = "Option::is_none")]
    min_insync_replicas: Option<String>,
}

/// Runs `neardup topics …`.
pub fn run(c: TopicsCommand, file: &FileConfig) -> Result<()> {
    match c {
        TopicsCommand::Create(a) => create(a, file),
    }
}

fn create(a: CreateArgs, file: &FileConfig) -> Result<()> {
    if a.partitions < 1 || a.replication_factor < 1 {
        bail!("partitions and replication-factor must be at least 1");
    }
    let min_isr = a
        .min_insync_replicas
        .unwrap_or_else(|| default_min_insync(a.replication_factor));
    if min_isr < 1 || min_isr > a.replication_factor {
        bail!(
            "min-insync-replicas must be between 1 and the replication factor ({}), got {min_isr}",
            a.replication_factor
        );
    }
    let min_isr_value = min_isr.to_string();
    let c = super::run::config(&a.run, &ReplayOptions::default(), file)?;
    let mut s = StageSettings::resolve(Mode::Run, &c)?;
    // the changelog is the decider's: named as a decider names it
    // (a sharded decider keeps none)
    s.changelog_topic = match c.kafka.changelog_topic.as_deref().map(str::trim) {
        Some("off") => None,
        Some(t) => Some(t.to_string()),
        None if c.stage.shards.unwrap_or(0) > 0 => None,
        None => Some(crate::stage::settings::DEFAULT_CHANGELOG_TOPIC.into()),
    };
    if a.run.check_config {
        // validate offline, as run --check-config does: nothing connects
        kafka::validate(&s)?;
        println!("{}", s.redacted_json());
        return Ok(());
    }
    let admin = kafka::admin(&s)?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let shards = c.stage.shards.unwrap_or(0);
    if shards > 1024 {
        bail!("shards must be 1 to 1024, got {shards}");
    }
    // (topic, partitions, compacted, every record kept)
    let mut wanted: Vec<(String, i32, bool, bool)> = vec![
        (s.unique_topic.clone(), a.partitions, false, false),
        (s.duplicate_topic.clone(), a.partitions, false, false),
        (s.dead_letter_topic.clone(), a.partitions, false, false),
        (s.signed_topic.clone(), 1, false, shards > 0),
    ];
    if let Some(c) = &s.changelog_topic {
        wanted.push((c.clone(), 1, true, false));
    }
    if shards > 0 {
        wanted.push((s.votes_topic.clone(), shards as i32, false, true));
    }
    wanted.dedup_by(|x, y| x.0 == y.0);
    let md = admin
        .inner()
        .fetch_metadata(None, Duration::from_secs(30))
        .context("cannot read the brokers' metadata")?;
    let existing = |t: &str| {
        md.topics()
            .iter()
            .find(|m| m.name() == t && m.error().is_none())
            .map(|m| m.partitions().len() as i32)
    };
    let mut summary = Vec::new();
    let mut new = Vec::new();
    for (t, parts, compact, keep) in &wanted {
        match existing(t) {
            Some(n) => summary.push(TopicState {
                topic: t.clone(),
                state: "exists",
                partitions: n,
                cleanup_policy: None,
                min_insync_replicas: None,
            }),
            None => {
                let mut nt =
                    NewTopic::new(t, *parts, TopicReplication::Fixed(a.replication_factor))
                        .set("min.insync.replicas", &min_isr_value);
                if *compact {
                    nt = nt.set("cleanup.policy", "compact");
                }
                if *keep {
                    nt = nt.set("retention.ms", "-1");
                }
                new.push(nt);
                summary.push(TopicState {
                    topic: t.clone(),
                    state: "created",
                    partitions: *parts,
                    cleanup_policy: compact.then(|| "compact".to_string()),
                    min_insync_replicas: Some(min_isr_value.clone()),
                });
            }
        }
    }
    if !new.is_empty() {
        let res = futures::executor::block_on(admin.create_topics(&new, &opts))
            .context("cannot create the topics")?;
        for r in res {
            match r {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((t, e)) => bail!("cannot create topic {t}: {e}"),
            }
        }
    }
    if let Some(c) = &s.changelog_topic {
        let st = summary.iter_mut().find(|x| &x.topic == c).expect("listed");
        if st.partitions != 1 {
            bail!(
                "changelog topic {c} has {} partitions; it must have exactly one (its order is \
                 the order of the decisions): delete it, or name another with changelog-topic",
                st.partitions
            );
        }
        if st.state == "exists" {
            let cfg = futures::executor::block_on(
                admin.describe_configs(&[ResourceSpecifier::Topic(c)], &opts),
            )
            .context("cannot read the changelog topic's settings")?;
            let policy = cfg
                .into_iter()
                .flatten()
                .flat_map(|r| r.entries)
                .find(|e| e.name == "cleanup.policy")
                .and_then(|e| e.value);
            if let Some(p) = &policy {
                if p.trim() != "compact" {
                    bail!(
                        "changelog topic {c} has cleanup.policy={p}: it must be compact (a \
                         time-based policy deletes documents a restore needs): alter the topic's \
                         configuration to cleanup.policy=compact"
                    );
                }
            }
            if policy.is_none() {
                eprintln!(
                    "warning: the brokers did not say the cleanup.policy of changelog topic {c}: \
                     check that it is compact (and only compact)"
                );
            }
            st.cleanup_policy = policy;
        }
    }
    // the topics that existed: what they require of their replicas
    let old: Vec<String> = summary
        .iter()
        .filter(|x| x.state == "exists")
        .map(|x| x.topic.clone())
        .collect();
    if !old.is_empty() {
        let specs: Vec<ResourceSpecifier<'_>> =
            old.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
        let cfg = futures::executor::block_on(admin.describe_configs(&specs, &opts))
            .context("cannot read the existing topics' settings")?;
        for (t, r) in old.iter().zip(cfg) {
            let value = r
                .ok()
                .into_iter()
                .flat_map(|r| r.entries)
                .find(|e| e.name == "min.insync.replicas")
                .and_then(|e| e.value);
            let replicas = md
                .topics()
                .iter()
                .find(|m| m.name() == t)
                .and_then(|m| m.partitions().first())
                .map_or(0, |p| p.replicas().len());
            if value.as_deref() == Some("1") && replicas >= 3 {
                eprintln!(
                    "warning: topic {t} exists with min.insync.replicas=1: a record acknowledged \
                     by one replica is lost if that broker is lost; alter it to {min_isr}"
                );
            }
            let st = summary.iter_mut().find(|x| &x.topic == t).expect("listed");
            st.min_insync_replicas = value;
        }
    }
    // the signed topic's order is the order of the decisions too
    if let Some(st) = summary.iter().find(|x| x.topic == s.signed_topic) {
        if st.partitions != 1 {
            bail!(
                "signed topic {} has {} partitions; it must have exactly one (the decider \
                 decides in its order): delete it, or name another with signed-topic",
                st.topic,
                st.partitions
            );
        }
    }
    // a sharded decider reads the signed and votes topics from their start at every start:
    // an existing one must keep every record too
    for t in [&s.signed_topic, &s.votes_topic] {
        if !summary
            .iter()
            .any(|x| shards > 0 && &x.topic == t && x.state == "exists")
        {
            continue;
        }
        let cfg = futures::executor::block_on(
            admin.describe_configs(&[ResourceSpecifier::Topic(t)], &opts),
        )
        .with_context(|| format!("cannot read the settings of topic {t}"))?;
        let entries: Vec<_> = cfg.into_iter().flatten().flat_map(|r| r.entries).collect();
        let value = |key: &str| {
            entries
                .iter()
                .find(|e| e.name == key)
                .and_then(|e| e.value.clone())
        };
        for key in ["retention.ms", "retention.bytes"] {
            if let Some(v) = value(key).filter(|v| v.trim() != "-1") {
                bail!(
                    "topic {t} exists with {key}={v}: the shards and the aggregator of a sharded \
                     decider read it from its start at every start, so it must keep every \
                     record: alter the topic's configuration to {key}=-1"
                );
            }
        }
        if let Some(p) = value("cleanup.policy").filter(|p| p.contains("compact")) {
            bail!(
                "topic {t} exists with cleanup.policy={p}: compaction removes records the \
                 shards read back at every start: alter it to cleanup.policy=delete"
            );
        }
    }
    if let Some(st) = summary
        .iter()
        .find(|x| shards > 0 && x.topic == s.votes_topic)
    {
        if st.partitions != shards as i32 {
            bail!(
                "votes topic {} has {} partitions; a decider of {shards} shards needs one a \
                 shard: delete it, or name another with votes-topic",
                st.topic,
                st.partitions
            );
        }
    }
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

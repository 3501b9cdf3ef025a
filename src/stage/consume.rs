//! The consume task: reads records until a stop, a fatal error or (a replay) the end
//! offsets; for each takes an in-flight permit, hands the payload to the sign pool and the
//! record, in consumption order, to the decider.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use tokio::sync::{mpsc, watch, Semaphore};
use tracing::{error, warn};

use super::flow::{since_ms, Generation, InFlight, Inbound, Job, HEAD_BYTES};
use super::kafka::{self, ReplayBounds, StageConsumer, StageContext, TxnSync};
use super::settings::StageSettings;
use super::sign::SignPool;
use crate::telemetry::{self as tm, Health};

/// What the consume task reads from and hands on to.
pub(super) struct Intake<'a> {
    pub(super) s: &'a StageSettings,
    pub(super) health: &'a Health,
    pub(super) consumer: &'a StageConsumer,
    pub(super) ctx: &'a StageContext,
    /// The group member's static instance id, named when the broker fences it.
    pub(super) instance: Option<&'a str>,
    /// Exactly-once: each record carries its consumer group generation and is counted.
    pub(super) sync: Option<&'a TxnSync>,
    /// A replay's end offsets.
    pub(super) bounds: Option<&'a mut ReplayBounds>,
    pub(super) permits: Arc<Semaphore>,
    pub(super) pool: &'a SignPool,
    pub(super) jobs: mpsc::Sender<Job>,
}

/// How the consume task ended.
pub(super) struct Consumed {
    /// `signal`, `end` (a replay's range done) or `error`.
    pub(super) stopped_by: &'static str,
    /// The broker fenced this member.
    pub(super) failure: Option<anyhow::Error>,
    pub(super) records: u64,
}

impl Intake<'_> {
    /// Consumes until stopped; the job channel closes when it returns.
    pub(super) async fn run(mut self, stop: &mut watch::Receiver<bool>) -> Consumed {
        let mut done = Consumed {
            stopped_by: "signal",
            failure: None,
            records: 0,
        };
        let mut generation: Option<Generation> = None;
        if self.replay_done() {
            done.stopped_by = "end";
            return done;
        }
        loop {
            if *stop.borrow() || self.s.shutdown.requested() {
                break;
            }
            let permit = tokio::select! {
                p = Arc::clone(&self.permits).acquire_owned() => p.expect("semaphore never closed"),
                _ = stop.changed() => break,
            };
            let msg = tokio::select! {
                m = self.consumer.recv() => m,
                _ = stop.changed() => break,
            };
            let m = match msg {
                Ok(m) => m,
                Err(KafkaError::PartitionEOF(p)) => {
                    if let Some(b) = self.bounds.as_deref_mut() {
                        b.eof(p);
                        if b.all_done() {
                            done.stopped_by = "end";
                            break;
                        }
                    }
                    continue;
                }
                Err(e) if kafka::fenced(&e) => {
                    let why = self.fenced_reason();
                    error!(error = %e, "{why}");
                    done.failure = Some(anyhow!(why));
                    done.stopped_by = "error";
                    break;
                }
                Err(e) => {
                    warn!(error = %e, "consume error");
                    metrics::counter!(tm::KAFKA_ERRORS, "code" => kafka::code(&e)).increment(1);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            self.health.brokers_down.store(false, Ordering::Relaxed);
            let (topic, partition, offset) = (m.topic(), m.partition(), m.offset());
            if let Some(b) = self.bounds.as_deref_mut() {
                if !b.take(topic, partition, offset) {
                    if b.all_done() {
                        done.stopped_by = "end";
                        break;
                    }
                    continue;
                }
            }
            metrics::counter!(tm::RECORDS_IN, "topic" => topic.to_string()).increment(1);
            done.records += 1;
            let value = m.payload().unwrap_or_default();
            let mut inbound = Inbound {
                topic: Arc::from(topic),
                partition,
                offset,
                key: m.key().map(<[u8]>::to_vec),
                timestamp_ms: m.timestamp().to_millis(),
                consumed: Instant::now(),
                broker_wait: since_ms(m.timestamp().to_millis()),
                head: value[..value.len().min(HEAD_BYTES)].to_vec(),
                len: value.len(),
                prepared: None,
                generation: None,
                _permit: InFlight::new(permit),
            };
            let payload = value.to_vec();
            drop(m);
            if let Some(sync) = self.sync {
                let epoch = self.ctx.rebalances();
                if generation.as_ref().is_none_or(|g| g.epoch != epoch) {
                    generation = Some(Generation {
                        epoch,
                        metadata: self.consumer.group_metadata().map(Arc::new),
                    });
                }
                inbound.generation = generation.clone();
                sync.consumed.fetch_add(1, Ordering::AcqRel);
            }
            let prepared = self.pool.submit(payload, inbound.timestamp_ms);
            if self.jobs.send(Job { inbound, prepared }).await.is_err() {
                // the decider stopped: a fatal error, reported when the stage ends
                done.stopped_by = "error";
                break;
            }
            if self.replay_done() {
                done.stopped_by = "end";
                break;
            }
        }
        done
    }

    fn replay_done(&self) -> bool {
        self.bounds.as_deref().is_some_and(|b| b.all_done())
    }

    fn fenced_reason(&self) -> String {
        format!(
            "the broker fenced this member: another process is in group {} with instance id \
             {}, or this one's group session timed out (brokers unreachable for longer than \
             session.timeout.ms) and it was replaced; a restart rejoins. Give each process its \
             own --instance-id: a copy of an index directory carries the id it keeps (file \
             instance-id), delete that file in the copy to have a new id made",
            self.s.group_id,
            self.instance.unwrap_or("?")
        )
    }
}

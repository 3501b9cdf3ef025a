//! Opening the decider's index: the index (or a dry run's checkpoint copy), a restore from
//! the changelog when it is empty or a restore was cut short, and the serving endpoints
//! over it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use tracing::{info, warn};

use super::changelog;
use super::flow::StageSummary;
use super::settings::StageSettings;
use crate::config::Role;
use crate::dedup::Deduplicator;
use crate::http::ServiceSlot;
use crate::index::{Index, IndexError};
use crate::record::now_secs;
use crate::serving::Service;
use crate::telemetry::Health;

/// Opens the decider's index, restores it from the changelog when it is empty (or a
/// restore was cut short), and publishes the serving endpoints over it. `None`: a stop
/// signal ended the open.
pub(super) async fn open_decider(
    s: &StageSettings,
    health: &Arc<Health>,
    service: &ServiceSlot,
    summary: &mut StageSummary,
) -> Result<Option<(Deduplicator, Option<std::path::PathBuf>)>> {
    let opening = Instant::now();
    if s.role == Role::Decider {
        let s2 = s.clone();
        tokio::task::spawn_blocking(move || changelog::check_signed(&s2)).await??;
    }
    if s.changelog_topic.is_some() && !s.dry_run {
        changelog::discard_partial(s)?;
    }
    let opened = {
        let s2 = s.clone();
        tokio::task::spawn_blocking(move || open_index(&s2)).await?
    };
    let (mut index, scratch) = match opened {
        Ok(x) => x,
        Err(e) if is_interrupted(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    if s.standby && index.next_doc() > 0 && index.changelog_next()?.is_none() {
        // an index written without exactly-once (or before a version that records the
        // offset) may hold documents the changelog lacks, and a standby never writes them
        // again: its index must be the changelog, so it is restored from it
        warn!(index = %s.index.display(),
            "standby: the index records no changelog offset (written without exactly-once, or by an \
             older version): restoring it from the changelog");
        drop(index);
        std::fs::write(
            s.index.join(changelog::RESTORE_MARKER),
            b"a standby restores an index that records no changelog offset\n",
        )
        .with_context(|| format!("cannot write to {}", s.index.display()))?;
        changelog::discard_partial(s)?;
        let s2 = s.clone();
        index = match tokio::task::spawn_blocking(move || open_index(&s2)).await? {
            Ok((index, _)) => index,
            Err(e) if is_interrupted(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    if let (Some(topic), false) = (&s.changelog_topic, s.dry_run) {
        let (s2, h2, topic) = (s.clone(), Arc::clone(health), topic.clone());
        let (back, restored) = tokio::task::spawn_blocking(move || {
            let r = changelog::restore(&s2, &mut index, &topic, &h2);
            (index, r)
        })
        .await?;
        index = back;
        match restored {
            Ok(n) => summary.restored = n,
            Err(e) if is_interrupted(&e) => {
                drop(index);
                remove_scratch(scratch);
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    let dedup = Deduplicator::new(index)?;
    // grouping and explaining read the index the decider writes (they share its store)
    *service.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(Service::new(
        dedup.index().reader(),
        s.serving.clone(),
    )?));
    health.index_open.store(true, Ordering::Relaxed);
    health.progressed();
    info!(index = %s.index.display(), role = s.role.as_str(), method = s.params.method.as_str(),
        threshold = s.params.threshold, dry_run = s.dry_run,
        open_s = opening.elapsed().as_secs_f64(), "index open");
    if let Some(r) = dedup.index().lists_restore() {
        info!(
            from_snapshot = r.from_snapshot,
            replayed = r.replayed,
            replayed_from = r.replayed_from,
            seconds = r.seconds,
            "lists restored"
        );
        if let Some(why) = &r.snapshot_refused {
            warn!(reason = %why, "lists snapshot not used; the lists were rebuilt from the documents");
        }
    }
    Ok(Some((dedup, scratch)))
}

pub(super) fn remove_scratch(scratch: Option<std::path::PathBuf>) {
    if let Some(dir) = scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The open was ended by a stop signal.
pub(super) fn is_interrupted(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<IndexError>(),
        Some(IndexError::Interrupted)
    )
}

/// Opens the index (a stop signal ends the open: [`IndexError::Interrupted`]); for a dry
/// run, a checkpoint copy in a scratch directory.
fn open_index(s: &StageSettings) -> Result<(Index, Option<std::path::PathBuf>)> {
    let stop = s.shutdown.flag();
    if !s.dry_run {
        return match Index::open_dir_until(&s.index, s.params.clone(), stop) {
            Ok(idx) => Ok((idx, None)),
            Err(IndexError::Interrupted) => Err(IndexError::Interrupted.into()),
            Err(e) => Err(anyhow!(e).context(format!("cannot open index {}", s.index.display()))),
        };
    }
    let scratch = std::env::temp_dir().join(format!(
        "neardup-dry-run-{}-{}",
        std::process::id(),
        now_secs()
    ));
    if s.index.exists() {
        Index::checkpoint(&s.index, &scratch)
            .with_context(|| format!("cannot copy index {} for the dry run", s.index.display()))?;
    }
    match Index::open_dir_until(&scratch, s.params.clone(), stop) {
        Ok(idx) => Ok((idx, Some(scratch))),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&scratch);
            match e {
                IndexError::Interrupted => Err(e.into()),
                e => Err(anyhow!(e).context(format!("cannot open index {}", s.index.display()))),
            }
        }
    }
}

//! The stage's identity in its consumer group.
//!
//! A consumer that is killed and started again without a stable identity joins as a new
//! member: the group keeps the dead member's partitions until its session times out
//! (`session.timeout.ms`, 45 s by default), and some brokers never hand them back at all.
//! With static membership (`group.instance.id`) the restarted process *is* the old member
//! and gets its partitions back at once. So `neardup run` is a static member by default:
//! with `--instance-id` (the chart passes the pod name), else with an id generated once and
//! kept in the index directory, which is the one thing a restarted stage always has again.
//! A decider with a standby is the exception: its lease says which process decides, and its
//! consumer is a dynamic member, so that a clean stop hands the signed topic over at once.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use tracing::{info, warn};

use super::settings::{valid_instance_id, Membership, Mode, StageSettings, INSTANCE_ID_FILE};

/// The `group.instance.id` of this process, or `None` for dynamic membership (and for a
/// replay, which assigns its partitions itself). Creates the persisted id on first use.
pub fn instance_id(s: &StageSettings) -> Result<Option<String>> {
    if s.mode == Mode::Replay {
        return Ok(None);
    }
    match &s.membership {
        Membership::Static(id) => {
            info!(instance_id = %id, "static group membership: a restart with this instance id \
                takes the partitions back at once");
            Ok(Some(id.clone()))
        }
        Membership::Dynamic => {
            let session = s
                .properties
                .get("session.timeout.ms")
                .cloned()
                .unwrap_or_else(|| "45000".into());
            warn!(session_timeout_ms = %session,
                "dynamic group membership (instance-id off): after a crash the restarted \
                 process is a new member, and the group keeps the old member's partitions \
                 until its session times out; set --instance-id (e.g. the pod name) to avoid it");
            Ok(None)
        }
        Membership::Persisted => {
            let (id, created) = persisted(&s.index)?;
            info!(instance_id = %id, file = %s.index.join(INSTANCE_ID_FILE).display(), created,
                "static group membership with the instance id kept in the index directory \
                 (two processes must never share it: the broker fences the older one)");
            Ok(Some(id))
        }
    }
}

/// Exactly-once: the producer's `transactional.id`, the group and the instance id, so that
/// one index keeps one id across restarts and the broker fences an older process of it. A
/// process without an instance id (a signer, or instance-id off) gets one of its own: the
/// group's generation still fences it, but a transaction it leaves open after a crash holds
/// back read_committed consumers until the broker times it out (transaction.timeout.ms).
///
/// A decider with a standby shares one id with its standby, `GROUP.CHANGELOG` (the changelog
/// names the index they both keep): the one that takes over fences the other.
pub fn transactional_id(s: &StageSettings, instance: Option<&str>) -> String {
    if let (true, Some(changelog)) = (s.standby, &s.changelog_topic) {
        return format!("{}.{changelog}", s.group_id);
    }
    match instance {
        Some(id) => format!("{}.{id}", s.group_id),
        None => {
            let id = format!("{}.neardup-{}-{:016x}", s.group_id, host(), random_u64());
            warn!(transactional_id = %id, "exactly-once without an instance id: a \
                transaction left open by a crash holds back read_committed consumers until \
                the broker times it out; set --instance-id (e.g. the pod name)");
            id
        }
    }
}

/// Reads the instance id kept in `dir`, or creates it: `neardup-HOST-RANDOM`, written to a
/// temporary file, synced and renamed, so a crash leaves either no file or a whole one.
fn persisted(dir: &Path) -> Result<(String, bool)> {
    let path = dir.join(INSTANCE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            if !valid_instance_id(id) {
                bail!(
                    "{} holds no valid instance id ({:?}): delete it to have a new one made, \
                     or set --instance-id",
                    path.display(),
                    text.chars().take(80).collect::<String>()
                );
            }
            return Ok((id.to_string(), false));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let id = format!("neardup-{}-{:016x}", host(), random_u64());
    let tmp = dir.join(format!("{INSTANCE_ID_FILE}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        writeln!(f, "{id}")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().with_context(|| format!("cannot write the instance id to {}", path.display()))?;
    Ok((id, true))
}

/// The host name, reduced to the characters an instance id may hold.
fn host() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let h: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(64)
        .collect();
    if h.is_empty() {
        "host".into()
    } else {
        h
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    // no /dev/urandom: the clock and the process id, mixed
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (u64::from(std::process::id()) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persisted_id_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (a, created) = persisted(dir.path()).unwrap();
        assert!(
            created && valid_instance_id(&a) && a.starts_with("neardup-"),
            "{a}"
        );
        let (b, created) = persisted(dir.path()).unwrap();
        assert_eq!((a.as_str(), created), (b.as_str(), false));
        let other = tempfile::tempdir().unwrap();
        assert_ne!(persisted(other.path()).unwrap().0, a);
        std::fs::write(dir.path().join(INSTANCE_ID_FILE), "pod/0\n").unwrap();
        let e = persisted(dir.path()).unwrap_err().to_string();
        assert!(e.contains("no valid instance id"), "{e}");
    }
}

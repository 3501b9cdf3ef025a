//! The votes record (`schemas/votes.v1.schema.json`): what a shard of a sharded decider
//! writes for every signed page it reads, on the internal votes topic (one partition a
//! shard), for the aggregator (docs/scale-out.md, "Past one decider").
//!
//! - Key: the page's id (UTF-8).
//! - Value: JSON with the shard and the shard count, the signed record's offset (`offset`,
//!   the page's stream position: the aggregator joins the shards' records on it), the id,
//!   how every shard judged the page (`judged`: the same on every shard, or `bad` for a
//!   signed record no shard can read) and the shard's votes: the pages it holds that the
//!   page is matched with, each with its stream position, id, URL, first-seen time,
//!   similarity, the index that found it and the probe (0 for the pair rule at τ, k ≥ 1 for
//!   one page with it by its k-th probe).

use serde::{Deserialize, Serialize};

use crate::dedup::sharded::{Judged, Vote};

/// Schema name of votes records.
pub const VOTES_SCHEMA: &str = "neardup.votes.v1";

/// `judged` of a signed record no shard can read: the aggregator writes its dead letter.
pub const BAD: &str = "bad";

/// One shard's record for one signed page.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VotesRecord {
    /// `neardup.votes.v1`.
    pub schema: String,
    /// The shard that wrote it.
    pub shard: usize,
    /// How many shards the decider is split in.
    pub shards: usize,
    /// The signed record's offset.
    pub offset: i64,
    /// The page's id (empty for a bad signed record).
    pub id: String,
    /// `skipped`, `own_text_too_short`, `matched`, `repeated` or `bad`.
    pub judged: String,
    /// The pages this shard holds that the page is matched with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
}

impl VotesRecord {
    /// The record of a page judged `judged` (`None`: a bad signed record) with `votes`.
    pub fn new(
        shard: usize,
        shards: usize,
        offset: i64,
        id: &str,
        judged: Option<Judged>,
        votes: &[Vote],
    ) -> VotesRecord {
        VotesRecord {
            schema: VOTES_SCHEMA.into(),
            shard,
            shards,
            offset,
            id: id.into(),
            judged: judged.map_or(BAD, Judged::as_str).into(),
            votes: votes.to_vec(),
        }
    }

    /// Decodes a votes record, checking its schema and shard count.
    pub fn decode(bytes: &[u8], shards: usize) -> Result<VotesRecord, String> {
        let r: VotesRecord =
            serde_json::from_slice(bytes).map_err(|e| format!("not a votes record: {e}"))?;
        if r.schema != VOTES_SCHEMA {
            return Err(format!(
                "schema {:?}, this aggregator reads {VOTES_SCHEMA}",
                r.schema
            ));
        }
        if r.shards != shards || r.shard >= shards {
            return Err(format!(
                "written by shard {} of {} shards, this aggregator has {shards}: every shard and \
                 the aggregator take the same shard count",
                r.shard, r.shards
            ));
        }
        if r.judged != BAD && Judged::parse(&r.judged).is_none() {
            return Err(format!("unknown judgement {:?}", r.judged));
        }
        Ok(r)
    }

    /// The judgement (`None`: a bad signed record).
    pub fn judgement(&self) -> Option<Judged> {
        Judged::parse(&self.judged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Found;

    #[test]
    fn a_votes_record_keeps_every_bit_of_a_similarity_and_refuses_another_shard_count() {
        let v = Vote {
            pos: 7,
            id: "a".into(),
            url: "https://a.test/".into(),
            first_seen: 1_795_000_000,
            similarity: 0.1 + 0.2,
            found: Found::Spotsigs,
            probe: 0,
        };
        let r = VotesRecord::new(
            1,
            2,
            42,
            "b",
            Some(Judged::Matched),
            std::slice::from_ref(&v),
        );
        let bytes = serde_json::to_vec(&r).unwrap();
        let back = VotesRecord::decode(&bytes, 2).unwrap();
        assert_eq!(back.votes, [v]);
        assert_eq!(back.judgement(), Some(Judged::Matched));
        assert!(VotesRecord::decode(&bytes, 3)
            .unwrap_err()
            .contains("same shard count"));
        let bad = VotesRecord::new(0, 2, 43, "", None, &[]);
        let back = VotesRecord::decode(&serde_json::to_vec(&bad).unwrap(), 2).unwrap();
        assert_eq!(back.judgement(), None);
        assert!(VotesRecord::decode(br#"{"schema":"x"}"#, 2).is_err());
    }
}

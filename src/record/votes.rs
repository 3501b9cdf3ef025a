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
//! - A record whose JSON would pass [`PART_BYTES`] is written in parts (`part` k of
//!   `parts`, each with a share of the votes, in order in the shard's partition and in one
//!   transaction under exactly-once): a flood of near-copies read before any is decided
//!   can give a page thousands of votes, past the broker's record limit
//!   (`message.max.bytes`, 1 MB unless set), which would stop the shard on that page at
//!   every restart. The aggregator joins the parts ([`Parts`]).

use serde::{Deserialize, Serialize};

use crate::dedup::sharded::{Judged, Vote};

/// Schema name of votes records.
pub const VOTES_SCHEMA: &str = "neardup.votes.v1";

/// `judged` of a signed record no shard can read: the aggregator writes its dead letter.
pub const BAD: &str = "bad";

/// The most bytes of a votes record written whole: a quarter of the broker's default record
/// limit (`message.max.bytes`, 1,048,588 bytes), so that a part stays under a limit set
/// lower than the default, and under the default with a vote of a long URL in it.
pub const PART_BYTES: usize = 256 * 1024;

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
    /// Of a record written in parts: this part's number, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<usize>,
    /// Of a record written in parts: how many (2 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<usize>,
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
            part: None,
            parts: None,
        }
    }

    /// The record's JSON: one value when it takes at most `most` bytes, else parts of it,
    /// each with an equal share of the votes in their order and at most `most` bytes (a
    /// part of one vote longer than that excepted).
    pub fn encode(&self, most: usize) -> serde_json::Result<Vec<Vec<u8>>> {
        let whole = serde_json::to_vec(self)?;
        if whole.len() <= most || self.votes.len() < 2 {
            return Ok(vec![whole]);
        }
        let mut n = whole.len().div_ceil(most).clamp(2, self.votes.len());
        loop {
            let size = self.votes.len().div_ceil(n);
            let parts = self.votes.len().div_ceil(size);
            let mut out = Vec::with_capacity(parts);
            for (k, votes) in self.votes.chunks(size).enumerate() {
                out.push(serde_json::to_vec(&VotesRecord {
                    schema: self.schema.clone(),
                    shard: self.shard,
                    shards: self.shards,
                    offset: self.offset,
                    id: self.id.clone(),
                    judged: self.judged.clone(),
                    votes: votes.to_vec(),
                    part: Some(k),
                    parts: Some(parts),
                })?);
            }
            if size == 1 || out.iter().all(|p| p.len() <= most) {
                return Ok(out);
            }
            n = (n * 2).min(self.votes.len());
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
        match (r.part, r.parts) {
            (None, None) => {}
            (Some(k), Some(n)) if n >= 2 && k < n => {}
            (k, n) => {
                return Err(format!(
                    "part {k:?} of {n:?}: a record in parts gives both, part below parts, \
                     parts 2 or more"
                ))
            }
        }
        Ok(r)
    }

    /// The judgement (`None`: a bad signed record).
    pub fn judgement(&self) -> Option<Judged> {
        Judged::parse(&self.judged)
    }
}

/// Joins the records of one shard's partition read in order into whole records: a record
/// written whole is whole; the parts of one are held until the last. A part that does not
/// follow the part before it (a shard that stopped between the parts of a record under
/// at-least-once, started again and wrote its records again from an earlier offset) drops
/// the parts held: the shard writes every part of that record again after it.
#[derive(Default)]
pub struct Parts {
    held: Option<VotesRecord>,
}

impl Parts {
    /// The whole record, when `r` completes one.
    pub fn join(&mut self, r: VotesRecord) -> Option<VotesRecord> {
        let (Some(k), Some(n)) = (r.part, r.parts) else {
            self.held = None;
            return Some(r);
        };
        let next = match self.held.take() {
            Some(mut h)
                if h.offset == r.offset
                    && h.part == Some(k.wrapping_sub(1))
                    && h.parts == Some(n) =>
            {
                h.votes.extend(r.votes);
                h.part = Some(k);
                h
            }
            // a first part starts a record; any other part without its predecessor is the
            // rest of a record whose start was dropped: the shard writes all of it again
            _ if k == 0 => r,
            _ => return None,
        };
        if k + 1 < n {
            self.held = Some(next);
            return None;
        }
        Some(VotesRecord {
            part: None,
            parts: None,
            ..next
        })
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
        assert_eq!(back.votes, std::slice::from_ref(&v));
        // a ratio of set sizes, which a best-effort float parser reads back an ulp off
        let eleventh = Vote {
            similarity: 1.0 / 11.0,
            ..v.clone()
        };
        let r = VotesRecord::new(1, 2, 42, "b", None, std::slice::from_ref(&eleventh));
        let again = VotesRecord::decode(&serde_json::to_vec(&r).unwrap(), 2).unwrap();
        assert_eq!(
            again.votes[0].similarity.to_bits(),
            (1.0f64 / 11.0).to_bits()
        );
        assert_eq!(back.judgement(), Some(Judged::Matched));
        assert!(VotesRecord::decode(&bytes, 3)
            .unwrap_err()
            .contains("same shard count"));
        let bad = VotesRecord::new(0, 2, 43, "", None, &[]);
        let back = VotesRecord::decode(&serde_json::to_vec(&bad).unwrap(), 2).unwrap();
        assert_eq!(back.judgement(), None);
        assert!(VotesRecord::decode(br#"{"schema":"x"}"#, 2).is_err());
    }

    fn flood(offset: i64, n: usize) -> VotesRecord {
        let votes: Vec<Vote> = (0..n)
            .map(|i| Vote {
                pos: i as u64,
                id: format!("copy-{i}"),
                url: format!("https://calendar.test/events?day={i}&{}", "x".repeat(300)),
                first_seen: 1_795_000_000 + i as i64,
                similarity: 1.0 / (1.0 + i as f64),
                found: Found::Spotsigs,
                probe: 0,
            })
            .collect();
        VotesRecord::new(1, 2, offset, "page", Some(Judged::Matched), &votes)
    }

    /// A record past the broker's record limit is written in parts under it, each a votes
    /// record of its schema, and joined back to the same record, votes in order.
    #[test]
    fn a_record_past_the_limit_is_written_in_parts_and_joined_back() {
        let r = flood(9, 5000);
        let whole = serde_json::to_vec(&r).unwrap();
        assert!(whole.len() > 1_048_588, "{} bytes", whole.len());
        let parts = r.encode(PART_BYTES).unwrap();
        assert!(parts.len() >= whole.len() / PART_BYTES, "{}", parts.len());
        let mut j = Parts::default();
        let mut joined = None;
        for (k, p) in parts.iter().enumerate() {
            assert!(p.len() <= PART_BYTES, "part {k}: {} bytes", p.len());
            let d = VotesRecord::decode(p, 2).unwrap();
            assert_eq!((d.part, d.parts), (Some(k), Some(parts.len())));
            joined = j.join(d);
            assert_eq!(joined.is_some(), k + 1 == parts.len());
        }
        assert_eq!(joined, Some(r));
        // a small record stays whole, without part numbers
        let small = flood(10, 3);
        let one = small.encode(PART_BYTES).unwrap();
        assert_eq!(one, [serde_json::to_vec(&small).unwrap()]);
        assert_eq!(
            j.join(VotesRecord::decode(&one[0], 2).unwrap()),
            Some(small)
        );
        // part numbers that do not hold together are refused
        for bad in [
            r#""part":2,"parts":2"#,
            r#""part":0,"parts":1"#,
            r#""part":0"#,
        ] {
            let text = format!(
                r#"{{"schema":"neardup.votes.v1","shard":0,"shards":2,"offset":1,"id":"a","judged":"matched",{bad}}}"#
            );
            assert!(VotesRecord::decode(text.as_bytes(), 2).is_err(), "{bad}");
        }
    }

    /// A shard stopped between the parts of a record and started again writes its records
    /// again from an earlier offset: the parts held are dropped and the record written
    /// again is joined whole; a part without the one before it is dropped too.
    #[test]
    fn parts_cut_short_by_a_restart_are_dropped_and_the_record_written_again_joins() {
        let r = flood(5, 3000);
        let parts: Vec<VotesRecord> = r
            .encode(PART_BYTES)
            .unwrap()
            .iter()
            .map(|p| VotesRecord::decode(p, 2).unwrap())
            .collect();
        assert!(parts.len() >= 3);
        let mut j = Parts::default();
        // the first two parts land, then the shard stops
        assert_eq!(j.join(parts[0].clone()), None);
        assert_eq!(j.join(parts[1].clone()), None);
        // started again from offset 4: its record again, whole, then offset 5's parts
        let four = flood(4, 2);
        assert_eq!(j.join(four.clone()), Some(four));
        let mut joined = None;
        for p in &parts {
            joined = j.join(p.clone());
        }
        assert_eq!(joined, Some(r.clone()));
        // a later part without its predecessor joins nothing, nor do the parts after it
        assert_eq!(j.join(parts[1].clone()), None);
        assert_eq!(j.join(parts[2].clone()), None);
        // a first part again starts over
        let mut joined = None;
        for p in &parts {
            joined = j.join(p.clone());
        }
        assert_eq!(joined, Some(r));
    }
}

//! Folding a result set: which of the given pages are near-duplicates of each other.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cache::Cache;
use super::error::ServeError;
use super::sigcache::SignatureCache;
use crate::index::{IndexReader, StoredSigs};
use crate::signature::{group, similarity, Measure, Signatures, Signer};

/// `POST /v1/group`: the result set, in its order.
#[derive(Clone, Debug, Deserialize, Serialize, Hash)]
#[serde(deny_unknown_fields)]
pub struct GroupRequest {
    /// The pages: ids of indexed pages and/or pages given inline.
    pub items: Vec<Item>,
    /// Similarity threshold τ; the index's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<ThresholdKey>,
}

/// A threshold that hashes (the request is a cache key).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(transparent)]
pub struct ThresholdKey(pub f64);

impl std::hash::Hash for ThresholdKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// One page of a result set.
#[derive(Clone, Debug, Deserialize, Serialize, Hash)]
#[serde(untagged)]
pub enum Item {
    /// The id of a page in the index (its stored signatures are used).
    Id(String),
    /// A page given inline, signed on the fly.
    Page(PageItem),
}

/// A page given inline: plain `text` or `html`, and an optional id for the answer.
#[derive(Clone, Debug, Deserialize, Serialize, Hash)]
#[serde(deny_unknown_fields)]
pub struct PageItem {
    /// Echoed in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Plain text: every non-empty line is a block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// HTML, signed exactly as the stage signs a fetched page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
}

/// A page of a group.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GroupMember {
    /// Position in the request's items.
    pub item: usize,
    /// Its id (inline pages: the id given, if any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Similarity to the group's representative (1 for the representative).
    pub similarity: f64,
}

/// A group of near-duplicates: the first in the request's order represents it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Group {
    /// The first member in the request's order.
    pub representative: GroupMember,
    /// The other members, in the request's order. A member reaches τ with some member of
    /// the group (single linkage), not necessarily with the representative.
    pub members: Vec<GroupMember>,
}

/// An item that could not be judged.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Unjudged {
    /// Position in the request's items.
    pub item: usize,
    /// Its id, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Why.
    pub reason: String,
}

/// Where the time of one answer went, in microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct GroupTiming {
    /// Reading stored signatures.
    pub read_us: f64,
    /// Signing inline pages.
    pub sign_us: f64,
    /// Grouping.
    pub group_us: f64,
    /// The whole answer (a cached answer: the lookup).
    pub total_us: f64,
}

/// The answer of `POST /v1/group`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GroupResponse {
    /// Items in the request.
    pub items: usize,
    /// τ used.
    pub threshold: f64,
    /// The similarity measure.
    pub measure: Measure,
    /// Groups of two or more, ordered by representative.
    pub groups: Vec<Group>,
    /// Ids that are not in the index.
    pub unknown: Vec<String>,
    /// Items in the index (or inline) without signatures to compare.
    pub unjudged: Vec<Unjudged>,
    /// Answered from the cache of repeated result sets.
    pub cached: bool,
    /// Timing.
    pub timing: GroupTiming,
}

/// What grouping reads: the index, the signer of inline pages, the bound of a request and
/// the caches (the service's own).
pub(super) struct Grouping<'a> {
    pub(super) reader: &'a IndexReader,
    pub(super) signer: &'a Signer,
    pub(super) max_items: usize,
    pub(super) cache: &'a Cache<Arc<GroupResponse>>,
    pub(super) signatures: &'a SignatureCache,
}

impl Grouping<'_> {
    /// Groups a result set (cached by request).
    pub(super) fn group(&self, req: &GroupRequest) -> Result<Arc<GroupResponse>, ServeError> {
        let started = Instant::now();
        if req.items.len() > self.max_items {
            return Err(ServeError::TooLarge(format!(
                "{} items; at most {} per request (the server's max-group-items)",
                req.items.len(),
                self.max_items
            )));
        }
        let tau = match req.threshold {
            None => self.reader.params().threshold,
            Some(ThresholdKey(t)) if t > 0.0 && t <= 1.0 => t,
            Some(ThresholdKey(t)) => {
                return Err(ServeError::BadRequest(format!(
                    "threshold must be within (0, 1] (got {t})"
                )))
            }
        };
        for (i, item) in req.items.iter().enumerate() {
            if let Item::Page(p) = item {
                if p.text.is_some() == p.html.is_some() {
                    return Err(ServeError::BadRequest(format!(
                        "item {i}: an inline page has exactly one of \"text\" and \"html\""
                    )));
                }
            }
        }
        let key = self.cache.key(req);
        if let Some(hit) = self.cache.get(key) {
            let mut out = (*hit).clone();
            out.cached = true;
            out.timing = GroupTiming {
                total_us: micros(started),
                ..GroupTiming::default()
            };
            return Ok(Arc::new(out));
        }
        let out = Arc::new(self.group_uncached(req, tau, started)?);
        // an unknown id may be decided later: such answers are not kept
        if out.unknown.is_empty() {
            self.cache.put(key, Arc::clone(&out));
        }
        Ok(out)
    }

    fn group_uncached(
        &self,
        req: &GroupRequest,
        tau: f64,
        started: Instant,
    ) -> Result<GroupResponse, ServeError> {
        let measure = self.reader.params().measure;
        let n = req.items.len();
        let mut sigs: Vec<Option<Signatures>> = vec![None; n];
        let mut unknown = Vec::new();
        let mut unjudged = Vec::new();

        let t_read = Instant::now();
        // ids whose signatures are not in memory yet
        let mut ids: Vec<(usize, &str, u128)> = Vec::new();
        for (i, it) in req.items.iter().enumerate() {
            if let Item::Id(id) = it {
                let key = self.signatures.key(id.as_str());
                match self.signatures.get(key) {
                    Some(s) => sigs[i] = Some(s),
                    None => ids.push((i, id.as_str(), key)),
                }
            }
        }
        let names: Vec<&str> = ids.iter().map(|(_, id, _)| *id).collect();
        let recs = self.reader.find_ids(&names)?;
        let known: Vec<bool> = recs.iter().map(Option::is_some).collect();
        let stored = self.reader.signatures_many(recs)?;
        for (((i, id, key), known), s) in ids.iter().zip(known).zip(stored) {
            if !known {
                unknown.push(id.to_string());
                continue;
            }
            match s {
                StoredSigs::Own(s) | StoredSigs::FromCanonical(s) => {
                    self.signatures.put(*key, &s);
                    sigs[*i] = Some(s);
                }
                StoredSigs::Unavailable(why) => unjudged.push(Unjudged {
                    item: *i,
                    id: Some(id.to_string()),
                    reason: why.to_string(),
                }),
            }
        }
        let read_us = micros(t_read);

        let t_sign = Instant::now();
        let min = self.reader.params().min_signatures as usize;
        for (i, it) in req.items.iter().enumerate() {
            let Item::Page(p) = it else { continue };
            let signed = match (&p.text, &p.html) {
                (Some(t), _) => self.signer.sign_text(t),
                (_, Some(h)) => self.signer.sign(h),
                _ => unreachable!("checked above"),
            };
            if signed.sigs.set_len() < min.max(1) {
                unjudged.push(Unjudged {
                    item: i,
                    id: p.id.clone(),
                    reason: format!(
                        "{} signatures, fewer than the index's min-signatures ({min})",
                        signed.sigs.set_len()
                    ),
                });
            } else {
                sigs[i] = Some(signed.sigs);
            }
        }
        let sign_us = micros(t_sign);
        unjudged.sort_by_key(|u| u.item);

        let t_group = Instant::now();
        let judged: Vec<usize> = (0..n).filter(|&i| sigs[i].is_some()).collect();
        let sets: Vec<&[(u32, u32)]> = judged
            .iter()
            .map(|&i| sigs[i].as_ref().map(|s| s.entries()).unwrap_or_default())
            .collect();
        let mut groups = Vec::new();
        for g in group(&sets, measure, tau) {
            let id_of = |i: usize| match &req.items[i] {
                Item::Id(id) => Some(id.clone()),
                Item::Page(p) => p.id.clone(),
            };
            let rep = judged[g[0]];
            let members = g[1..]
                .iter()
                .map(|&k| GroupMember {
                    item: judged[k],
                    id: id_of(judged[k]),
                    similarity: similarity(sets[k], sets[g[0]], measure),
                })
                .collect();
            groups.push(Group {
                representative: GroupMember {
                    item: rep,
                    id: id_of(rep),
                    similarity: 1.0,
                },
                members,
            });
        }
        let group_us = micros(t_group);
        Ok(GroupResponse {
            items: n,
            threshold: tau,
            measure,
            groups,
            unknown,
            unjudged,
            cached: false,
            timing: GroupTiming {
                read_us,
                sign_us,
                group_us,
                total_us: micros(started),
            },
        })
    }
}

fn micros(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

//! `neardup explain`: why a page was decided as it was, from the index (read only, so it
//! works while the stage writes it).

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::input;
use crate::serving::{Limits, Service, Texts};

/// Arguments of `neardup explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Index directory (read only)
    #[arg(long, env = "NEARDUP_INDEX")]
    pub index: PathBuf,
    /// Page JSONL (plain or gzip) holding the pages' HTML: their signatures are then shown
    /// as strings instead of hashes
    #[arg(long)]
    pub pages: Option<PathBuf>,
    /// The page's id
    pub id: String,
    /// A second page to compare with (by default a duplicate is compared with its
    /// canonical page)
    pub other: Option<String>,
}

#[derive(serde::Deserialize)]
struct PageHtml {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    html: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

/// Runs `neardup explain`.
pub fn run(a: ExplainArgs) -> Result<()> {
    let (reader, _own) = super::serve::open_follower(&a.index, 64)?;
    let service = Service::new(reader, Limits::default())?;
    let first = service.explain(&a.id, a.other.as_deref(), &Texts::default())?;
    let mut out = first.clone();
    if let Some(path) = &a.pages {
        let wanted: HashSet<&str> = [
            Some(a.id.as_str()),
            a.other.as_deref(),
            first.canonical_id.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut texts = Texts::default();
        input::for_each_json(path, |p: PageHtml| {
            if p.id.as_deref().is_some_and(|id| wanted.contains(id)) {
                if let Some(h) = &p.html {
                    texts.add_html(service.signer(), h);
                } else if let Some(t) = &p.text {
                    texts.add_text(service.signer(), t);
                }
            }
            true
        })?;
        out = service.explain(&a.id, a.other.as_deref(), &texts)?;
    }
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

//! `neardup group`: fold the near-duplicates of a result set given as a file, the answer
//! of `POST /v1/group` on standard output.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::input;
use super::serve::serve_config;
use crate::config::{FileConfig, ServeOptions};
use crate::index::{Index, IndexParams};
use crate::serving::{GroupRequest, Item, PageItem, Service};

/// Arguments of `neardup group`.
#[derive(Args, Debug)]
pub struct GroupArgs {
    /// The result set, one item a line (plain or gzip JSONL): an id as a JSON string or
    /// `{"id": …}`, or a page `{"id": …, "html": …}` / `{"id": …, "text": …}` (other page
    /// fields are ignored); "-" for standard input
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Ids of indexed pages, before the items of --input
    pub ids: Vec<String>,
    /// Index whose stored signatures the ids refer to (read only); without it every item
    /// must be a page, signed with the default settings
    #[arg(long, env = "NEARDUP_INDEX")]
    pub index: Option<PathBuf>,
    /// Similarity threshold τ [default: the index's]
    #[arg(long)]
    pub threshold: Option<f64>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeOptions,
}

/// One line of the input as an item.
fn item(v: serde_json::Value) -> Result<Item, String> {
    let field = |o: &serde_json::Map<String, serde_json::Value>,
                 k: &str|
     -> Result<Option<String>, String> {
        match o.get(k) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("\"{k}\" is not a string")),
        }
    };
    match v {
        serde_json::Value::String(id) => Ok(Item::Id(id)),
        serde_json::Value::Object(o) => {
            let (id, text, html) = (field(&o, "id")?, field(&o, "text")?, field(&o, "html")?);
            match (id, text, html) {
                (Some(id), None, None) => Ok(Item::Id(id)),
                (_, Some(_), Some(_)) => Err("a page has \"text\" or \"html\", not both".into()),
                (id, text, html) if text.is_some() || html.is_some() => {
                    Ok(Item::Page(PageItem { id, text, html }))
                }
                _ => Err("an item needs an \"id\", a \"text\" or an \"html\"".into()),
            }
        }
        _ => Err("an item is a JSON string (an id) or an object".into()),
    }
}

/// Runs `neardup group`.
pub fn run(a: GroupArgs, file: &FileConfig) -> Result<()> {
    let limits = serve_config(&a.serve, file)?.serving;
    let mut items: Vec<Item> = a.ids.iter().cloned().map(Item::Id).collect();
    if let Some(path) = &a.input {
        let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            input::open(path)?
        };
        for (n, line) in reader.lines().enumerate() {
            let at = || format!("{} line {}", path.display(), n + 1);
            let line = line.with_context(at)?;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(&line).with_context(|| format!("{}: not JSON", at()))?;
            items.push(item(v).map_err(|e| anyhow::anyhow!("{}: {e}", at()))?);
        }
    }
    if items.is_empty() {
        bail!("nothing to group: give ids, or --input FILE with one item a line");
    }
    let _follower;
    let service = match &a.index {
        Some(dir) => {
            let (reader, own) =
                super::serve::open_follower(dir, super::serve::DEFAULT_BLOCK_CACHE_MIB)?;
            _follower = own;
            Service::new(reader, limits)?
        }
        None => {
            if items.iter().any(|i| matches!(i, Item::Id(_))) {
                bail!("ids need --index (the index whose stored signatures they refer to)");
            }
            Service::new(Index::memory(IndexParams::default())?.reader(), limits)?
        }
    };
    let req = GroupRequest {
        items,
        threshold: a.threshold.map(crate::serving::ThresholdKey),
    };
    let answer = service.group(&req)?;
    println!("{}", serde_json::to_string_pretty(&*answer)?);
    Ok(())
}

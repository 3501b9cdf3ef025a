//! `neardup sign`: the signatures and fingerprint of each page, as JSONL on stdout.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use super::input;
use crate::config::{
    Config, FileConfig, MethodOptions, Options, SignatureOptions, DEFAULT_MAX_RECORD_BYTES,
};
use crate::index::Method;
use crate::record::decode_page;
use crate::signature::{fingerprint::to_hex, Family, Signer};

/// Arguments of `neardup sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// Page JSONL (plain or gzip), - for stdin
    #[arg(long, env = "NEARDUP_INPUT")]
    pub input: PathBuf,
    /// Also print every signature as a string (antecedent:t1:…:tc, or a sentence's words)
    #[arg(long)]
    pub strings: bool,
    /// Sign as this method does (sentences: sentence shingles; the others: SpotSigs)
    /// [default: the file's method, else spotsigs]
    #[arg(long, env = "NEARDUP_METHOD")]
    pub method: Option<Method>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub signature: SignatureOptions,
}

#[derive(Serialize)]
struct Out<'a> {
    line: u64,
    id: Option<&'a str>,
    url: Option<&'a str>,
    signatures: usize,
    /// Words of the text that was signed (the main region, or the whole page).
    #[serde(skip_serializing_if = "Option::is_none")]
    words: Option<usize>,
    /// What signed the page: spotsigs, words (a short text's word shingles), page (every
    /// block: the region had no prose) or sentences.
    #[serde(skip_serializing_if = "Option::is_none")]
    family: Option<Family>,
    fingerprint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strings: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs `neardup sign`.
pub fn run(args: SignArgs, file: &FileConfig) -> Result<()> {
    let options = Options {
        signature: args.signature.clone(),
        method: MethodOptions {
            method: args.method,
            threshold: None,
        },
        ..Default::default()
    };
    let config = Config::resolve(options, file)?.params.signature;
    let signer = Signer::new(&config)?;
    let mut reader = input::open(&args.input)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut n = 0;
    loop {
        let batch = input::read_batch(
            &mut reader,
            &mut n,
            256,
            DEFAULT_MAX_RECORD_BYTES,
            usize::MAX,
        )?;
        if batch.is_empty() {
            break;
        }
        for l in batch {
            let rec = match decode_page(&l.bytes, usize::MAX) {
                Ok(p) => {
                    let s = signer.sign(&p.page.html);
                    let strings = args.strings.then(|| signer.signature_strings(&p.page.html));
                    serde_json::to_string(&Out {
                        line: l.number,
                        id: Some(&p.doc_id),
                        url: Some(&p.page.url),
                        signatures: s.sigs.set_len(),
                        words: Some(s.tokens),
                        family: Some(s.family),
                        fingerprint: Some(to_hex(&s.fingerprint)),
                        strings,
                        error: None,
                    })?
                }
                Err(bad) => serde_json::to_string(&Out {
                    line: l.number,
                    id: None,
                    url: None,
                    signatures: 0,
                    words: None,
                    family: None,
                    fingerprint: None,
                    strings: None,
                    error: Some(bad.to_string()),
                })?,
            };
            writeln!(out, "{rec}")?;
        }
    }
    out.flush()?;
    Ok(())
}

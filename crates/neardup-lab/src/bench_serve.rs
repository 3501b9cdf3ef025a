//! `neardup-lab serve`: folding result sets of ids from an index, as a search front end
//! asks for it. Result sets hold near-duplicate pairs (a duplicate and its canonical page)
//! at a chosen share and unique pages for the rest, in random order. Phases:
//!
//! - `handler`: [`Service::group`] called directly on one thread, no cache: the time
//!   inside the handler (reading the stored signatures, grouping);
//! - `http-uncached`: every request a new result set, over HTTP/1.1 keep-alive on
//!   loopback, from a bounded number of connections (closed loop);
//! - `http-cached`: requests drawn from a small pool of result sets, answered from the
//!   cache of repeated result sets after their first time.
//!
//! The server runs in this process on its own runtime (`--server-threads`, one by
//! default), or `--url` points the client at a running `neardup serve`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde::Serialize;

use crate::http::{self, AppState, HttpLimits};
use crate::index::DecisionKind;
use crate::serving::{GroupRequest, GroupResponse, Item, Limits, Service};
use crate::synthetic::Rng;
use crate::telemetry::Health;

/// Arguments of `neardup-lab serve`.
#[derive(Args, Debug)]
pub struct BenchServeArgs {
    /// Index directory (read only)
    #[arg(long)]
    pub index: PathBuf,
    /// Ids per request
    #[arg(long, default_value_t = 100)]
    pub items: usize,
    /// Requests in each phase
    #[arg(long, default_value_t = 20_000)]
    pub requests: usize,
    /// Concurrent connections of the HTTP client
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Share of a result set's items that belong to a near-duplicate pair
    #[arg(long, default_value_t = 0.3)]
    pub duplicate_share: f64,
    /// Distinct result sets of the cached phase
    #[arg(long, default_value_t = 200)]
    pub cached_sets: usize,
    /// Block cache of the reading process in MiB (as `neardup serve --block-cache-mib`)
    #[arg(long, default_value_t = neardup::cli::serve::DEFAULT_BLOCK_CACHE_MIB)]
    pub block_cache_mib: usize,
    /// Pages whose signatures the server keeps in memory (as `--signature-cache-entries`)
    #[arg(long, default_value_t = 100_000)]
    pub signature_cache_entries: usize,
    /// Share of the ids drawn from a hot set, the most recent 1 % of the pages (the rest
    /// uniformly from all): result sets of a news search favour the stories of the day
    #[arg(long, default_value_t = 0.0)]
    pub hot_share: f64,
    /// Server runtime threads (in-process server)
    #[arg(long, default_value_t = 1)]
    pub server_threads: usize,
    /// A running server to load instead of the in-process one, e.g. http://127.0.0.1:9464
    #[arg(long)]
    pub url: Option<String>,
    /// Print rows as JSON lines
    #[arg(long)]
    pub json: bool,
}

/// One phase's figures.
#[derive(Debug, Serialize)]
pub struct ServeRow {
    /// handler, http-uncached, http-cached.
    pub phase: String,
    /// Requests answered.
    pub requests: usize,
    /// Requests per second.
    pub per_second: f64,
    /// Requests per minute.
    pub per_minute: f64,
    /// Latency seen by the client (HTTP phases) or the call (handler), µs.
    pub p50_us: f64,
    /// p99, µs.
    pub p99_us: f64,
    /// p99.9, µs.
    pub p999_us: f64,
    /// Time inside the handler as the answers report it, p50 µs.
    pub handler_p50_us: f64,
    /// p99 µs.
    pub handler_p99_us: f64,
    /// p99.9 µs.
    pub handler_p999_us: f64,
    /// Mean time reading stored signatures, µs (handler phase).
    pub read_mean_us: f64,
    /// Mean time grouping, µs (handler phase).
    pub group_mean_us: f64,
    /// Answers from the cache.
    pub cached: usize,
    /// Groups found per request, mean.
    pub groups_per_request: f64,
    /// Non-200 answers.
    pub errors: usize,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    let at = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[at]
}

/// Result sets: `pairs` near-duplicate pairs, the rest unique pages, shuffled.
fn result_set(
    rng: &mut Rng,
    items: usize,
    share: f64,
    hot: f64,
    uniques: &[String],
    dups: &[(String, String)],
) -> GroupRequest {
    // draws from the most recent 1 % (the hot set) with probability `hot`
    let pick = |rng: &mut Rng, n: usize| {
        let hot_set = (n / 100).max(1);
        if rng.unit() < hot {
            n - hot_set + rng.below(hot_set as u64) as usize
        } else {
            rng.below(n as u64) as usize
        }
    };
    let pairs = if dups.is_empty() {
        0
    } else {
        ((items as f64 * share) / 2.0).round() as usize
    };
    let mut out: Vec<Item> = Vec::with_capacity(items);
    for _ in 0..pairs.min(items / 2) {
        let (d, c) = &dups[pick(rng, dups.len())];
        out.push(Item::Id(c.clone()));
        out.push(Item::Id(d.clone()));
    }
    while out.len() < items {
        out.push(Item::Id(uniques[pick(rng, uniques.len())].clone()));
    }
    for i in (1..out.len()).rev() {
        out.swap(i, rng.below(i as u64 + 1) as usize);
    }
    GroupRequest {
        items: out,
        threshold: None,
    }
}

/// Runs `neardup-lab serve`.
pub fn run(a: BenchServeArgs) -> Result<()> {
    if a.items == 0 || a.requests == 0 || a.connections == 0 || a.server_threads == 0 {
        bail!("items, requests, connections and server-threads must be at least 1");
    }
    let (reader, _own) = neardup::cli::serve::open_follower(&a.index, a.block_cache_mib)?;
    let (mut uniques, mut dups) = (Vec::new(), Vec::new());
    let t = Instant::now();
    reader.for_each_doc(&mut |rec| {
        match rec.decision.kind {
            DecisionKind::Unique => uniques.push(rec.id),
            DecisionKind::Duplicate if rec.delta.is_some() => {
                if let Some(c) = rec.decision.canonical_id {
                    dups.push((rec.id, c));
                }
            }
            _ => {}
        }
        true
    })?;
    if uniques.is_empty() {
        bail!("{} holds no unique page", a.index.display());
    }
    eprintln!(
        "neardup-lab serve: {} unique pages, {} duplicates with their canonical page, read in {:.1} s",
        uniques.len(),
        dups.len(),
        t.elapsed().as_secs_f64()
    );
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let new_set = |rng: &mut Rng| {
        result_set(
            rng,
            a.items,
            a.duplicate_share,
            a.hot_share,
            &uniques,
            &dups,
        )
    };
    let mut rows = Vec::new();

    // the handler alone, uncached
    let limits = Limits {
        signature_cache_entries: a.signature_cache_entries,
        ..Limits::default()
    };
    let service = Service::new(
        reader.clone(),
        Limits {
            cache_entries: 0,
            ..limits.clone()
        },
    )?;
    // a new result set every request (the answers are not cached here; the signatures of
    // pages seen before are, as in a serving process)
    let sets: Vec<GroupRequest> = (0..a.requests + 200).map(|_| new_set(&mut rng)).collect();
    // as `neardup serve` does at start: the most recent pages' signatures in memory
    let t = Instant::now();
    let preloaded = service.preload(&|| false)?;
    eprintln!(
        "neardup-lab serve: {preloaded} pages' signatures preloaded in {:.1} s (cache of {})",
        t.elapsed().as_secs_f64(),
        a.signature_cache_entries
    );
    for s in &sets[a.requests..] {
        service.group(s)?; // warm up
    }
    let (mut lat, mut inner) = (Vec::new(), Vec::new());
    let mut groups = 0usize;
    let (mut read, mut grouping) = (0.0, 0.0);
    let t = Instant::now();
    for s in &sets[..a.requests] {
        let started = Instant::now();
        let r = service.group(s)?;
        lat.push(started.elapsed().as_secs_f64() * 1e6);
        inner.push(r.timing.total_us);
        read += r.timing.read_us;
        grouping += r.timing.group_us;
        groups += r.groups.len();
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push(ServeRow {
        phase: "handler".into(),
        requests: a.requests,
        per_second: a.requests as f64 / secs,
        per_minute: a.requests as f64 / secs * 60.0,
        p50_us: pct(&mut lat, 0.5),
        p99_us: pct(&mut lat, 0.99),
        p999_us: pct(&mut lat, 0.999),
        handler_p50_us: pct(&mut inner, 0.5),
        handler_p99_us: pct(&mut inner, 0.99),
        handler_p999_us: pct(&mut inner, 0.999),
        read_mean_us: read / a.requests as f64,
        group_mean_us: grouping / a.requests as f64,
        cached: 0,
        groups_per_request: groups as f64 / a.requests as f64,
        errors: 0,
    });
    print_row(&rows[rows.len() - 1], a.json);

    // over HTTP
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.server_threads)
        .max_blocking_threads(a.server_threads)
        .thread_name("neardup-bench-server")
        .enable_all()
        .build()?;
    let (url, stop) = match &a.url {
        Some(u) => (u.trim_end_matches('/').to_string(), None),
        None => {
            let service = Arc::new(Service::new(reader.clone(), limits.clone())?);
            service.preload(&|| false)?;
            let health = Arc::new(Health::serving());
            health.index_open.store(true, Ordering::Relaxed);
            let state = AppState {
                health,
                metrics: crate::telemetry::metrics_handle()?,
                service: Arc::new(std::sync::RwLock::new(Some(service))),
            };
            let limits = HttpLimits::default();
            let listener = server_rt.block_on(http::bind("127.0.0.1:0".parse()?))?;
            let addr = listener.local_addr()?;
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            server_rt.spawn(http::serve(
                listener,
                http::router(state, limits),
                limits,
                async move {
                    let _ = rx.await;
                },
                Duration::from_secs(5),
            ));
            (format!("http://{addr}"), Some(tx))
        }
    };
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut body =
        || Bytes::from(serde_json::to_vec(&new_set(&mut rng)).expect("request serializes"));
    let uncached: Vec<Bytes> = (0..a.requests).map(|_| body()).collect();
    let pool: Vec<Bytes> = (0..a.cached_sets.max(1)).map(|_| body()).collect();
    let cached: Vec<Bytes> = (0..a.requests)
        .map(|i| pool[(i * 7919) % pool.len()].clone())
        .collect();
    for (phase, bodies) in [("http-uncached", uncached), ("http-cached", cached)] {
        let row = client_rt.block_on(load(&url, phase, bodies, a.connections))?;
        print_row(&row, a.json);
        rows.push(row);
    }
    if let Some(tx) = stop {
        let _ = tx.send(());
    }
    server_rt.shutdown_timeout(Duration::from_secs(5));
    Ok(())
}

fn print_row(r: &ServeRow, json: bool) {
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    } else {
        println!(
            "{:<14} {:>7} req {:>9.0} req/s {:>10.0} req/min  latency p50/p99/p99.9 {:>6.0}/{:>6.0}/{:>6.0} us  handler {:>6.0}/{:>6.0}/{:>6.0} us (read {:.0}, group {:.0})  cached {:>6}  groups/req {:>5.2}  errors {}",
            r.phase, r.requests, r.per_second, r.per_minute, r.p50_us, r.p99_us, r.p999_us,
            r.handler_p50_us, r.handler_p99_us, r.handler_p999_us, r.read_mean_us, r.group_mean_us,
            r.cached, r.groups_per_request, r.errors
        );
    }
}

/// Sends every body as `POST /v1/group` from `connections` keep-alive connections.
async fn load(url: &str, phase: &str, bodies: Vec<Bytes>, connections: usize) -> Result<ServeRow> {
    let authority = url
        .strip_prefix("http://")
        .context("--url must start with http://")?
        .to_string();
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (bodies, next, authority) = (Arc::clone(&bodies), Arc::clone(&next), authority.clone());
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(&authority).await?;
            stream.set_nodelay(true)?;
            let (mut send, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut out: Vec<(f64, f64, bool, usize, bool)> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else { break };
                let req = hyper::Request::post("/v1/group")
                    .header(hyper::header::HOST, authority.as_str())
                    .header(hyper::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(body.clone()))?;
                let t = Instant::now();
                send.ready().await?;
                let resp = send.send_request(req).await?;
                let ok = resp.status().is_success();
                let bytes = resp.into_body().collect().await?.to_bytes();
                let lat = t.elapsed().as_secs_f64() * 1e6;
                match serde_json::from_slice::<GroupResponse>(&bytes) {
                    Ok(r) if ok => {
                        out.push((lat, r.timing.total_us, r.cached, r.groups.len(), true))
                    }
                    _ => out.push((lat, 0.0, false, 0, false)),
                }
            }
            anyhow::Ok(out)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = started.elapsed().as_secs_f64();
    let mut lat: Vec<f64> = all.iter().map(|r| r.0).collect();
    let mut inner: Vec<f64> = all.iter().filter(|r| r.4).map(|r| r.1).collect();
    let n = all.len();
    Ok(ServeRow {
        phase: phase.into(),
        requests: n,
        per_second: n as f64 / secs,
        per_minute: n as f64 / secs * 60.0,
        p50_us: pct(&mut lat, 0.5),
        p99_us: pct(&mut lat, 0.99),
        p999_us: pct(&mut lat, 0.999),
        handler_p50_us: pct(&mut inner, 0.5),
        handler_p99_us: pct(&mut inner, 0.99),
        handler_p999_us: pct(&mut inner, 0.999),
        read_mean_us: 0.0,
        group_mean_us: 0.0,
        cached: all.iter().filter(|r| r.2).count(),
        groups_per_request: all.iter().map(|r| r.3).sum::<usize>() as f64 / n.max(1) as f64,
        errors: all.iter().filter(|r| !r.4).count(),
    })
}

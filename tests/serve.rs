//! `neardup serve`, `neardup group` and `neardup explain` as a user runs them, over an index
//! that `neardup dedup` wrote (and keeps writing): grouping against brute force and the
//! library function, explain against the decisions of file mode, bad requests, the cache of
//! repeated result sets, following the writer, SIGTERM. At the defaults users get.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;
use neardup::signature::{similarity, Measure, SignatureConfig, Signer};

fn validator(name: &str) -> jsonschema::Validator {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn valid(v: &jsonschema::Validator, x: &serde_json::Value) {
    if let Err(e) = v.validate(x) {
        panic!("{e}: {x}");
    }
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(index: &Path, log: &Path) -> Server {
        let port = free_port();
        let child = neardup()
            .args(["serve", "--index"])
            .arg(index)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let s = Server { child, port };
        wait_until(Duration::from_secs(30), "serve ready", || {
            matches!(http_get(port, "/readyz"), Some((200, _)))
        });
        s
    }
}

impl Server {
    /// Waits up to 20 s for the server to exit; its exit code.
    fn exit_code(&mut self) -> Option<i32> {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            assert!(std::time::Instant::now() < deadline, "serve did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pages of `stories` stories in three templates (the third edited), and a page too short
/// to be judged.
fn pages(first: u64, stories: u64) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for copy in 0..3u64 {
        for s in first..first + stories {
            v.push((format!("s{s:05}-c{copy}"), story_page(s, copy, copy == 2)));
        }
    }
    v
}

fn write_pages(path: &Path, pages: &[(String, String)]) {
    let mut out = Vec::new();
    for (id, html) in pages {
        out.extend(page_json(id, &format!("https://site.test/{id}"), html));
        out.push(b'\n');
    }
    std::fs::write(path, out).unwrap();
}

fn dedup(input: &Path, index: &Path, out: &Path) -> BTreeMap<String, serde_json::Value> {
    output_ok(
        neardup()
            .args(["dedup", "--input"])
            .arg(input)
            .arg("--index")
            .arg(index)
            .arg("--unique")
            .arg(out)
            .arg("--no-text"),
        "neardup dedup",
    );
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// Connected components of the pairs with Jaccard ≥ τ, by the full similarity of every pair.
fn brute_force(sets: &[Option<Vec<(u32, u32)>>], tau: f64) -> BTreeSet<BTreeSet<usize>> {
    let n = sets.len();
    let mut comp: Vec<usize> = (0..n).collect();
    for i in 0..n {
        for j in i + 1..n {
            let (Some(a), Some(b)) = (&sets[i], &sets[j]) else {
                continue;
            };
            if similarity(a, b, Measure::Jaccard) >= tau {
                let (ci, cj) = (comp[i], comp[j]);
                comp.iter_mut().filter(|c| **c == cj).for_each(|c| *c = ci);
            }
        }
    }
    let mut groups: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (i, c) in comp.into_iter().enumerate() {
        groups.entry(c).or_default().insert(i);
    }
    groups.into_values().filter(|g| g.len() > 1).collect()
}

fn answer_groups(answer: &serde_json::Value) -> BTreeSet<BTreeSet<usize>> {
    answer["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let mut s: BTreeSet<usize> = g["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["item"].as_u64().unwrap() as usize)
                .collect();
            s.insert(g["representative"]["item"].as_u64().unwrap() as usize);
            s
        })
        .collect()
}

#[test]
fn serve_groups_explains_follows_the_writer_and_refuses_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let index = d.join("index");
    let mut all = pages(0, 40);
    all.push(("short-1".into(), "<p>The end.</p>".into()));
    write_pages(&d.join("pages.jsonl"), &all);
    let decided = dedup(&d.join("pages.jsonl"), &index, &d.join("out.jsonl"));
    let dups: Vec<&String> = decided
        .iter()
        .filter(|(_, v)| v["dedup"]["decision"] == "duplicate")
        .map(|(k, _)| k)
        .collect();
    assert!(dups.len() >= 40, "{} duplicates", dups.len());

    let server = Server::start(&index, &d.join("serve.log"));
    let port = server.port;

    // a result set of 100: stories with their copies, pages of other stories, an unknown id
    // and a page too short to be judged, in a mixed order
    let mut items: Vec<String> = Vec::new();
    for s in 0..32u64 {
        items.push(format!("s{s:05}-c{}", s % 3));
        if s % 2 == 0 {
            items.push(format!("s{s:05}-c{}", (s + 1) % 3));
        }
    }
    items.push("never-seen".into());
    items.push("short-1".into());
    while items.len() < 100 {
        let s = 32 + items.len() as u64 % 8;
        let id = format!("s{s:05}-c{}", items.len() % 3);
        if !items.contains(&id) {
            items.push(id);
        } else {
            items.push(format!("s{s:05}-c{}", (items.len() + 1) % 3));
        }
    }
    items.truncate(100);
    let request = serde_json::json!({ "items": items });
    let (group_req, group_resp, explain_v, error_v) = (
        validator("group-request.v1.schema.json"),
        validator("group-response.v1.schema.json"),
        validator("explain.v1.schema.json"),
        validator("error.v1.schema.json"),
    );
    valid(&group_req, &request);
    let (code, answer) = http_post_json(port, "/v1/group", &request);
    assert_eq!(code, 200, "{answer}");
    valid(&group_resp, &answer);
    assert_eq!(answer["items"], 100);
    assert_eq!(answer["unknown"], serde_json::json!(["never-seen"]));
    let unjudged = answer["unjudged"].as_array().unwrap();
    assert_eq!(unjudged.len(), 1, "{answer}");
    assert_eq!(unjudged[0]["id"], "short-1");
    assert_eq!(answer["cached"], false);

    // the same groups as brute force over the pages signed here, and as the library function
    let signer = Signer::new(&SignatureConfig::default()).unwrap();
    let html: BTreeMap<&str, &str> = all.iter().map(|(i, h)| (i.as_str(), h.as_str())).collect();
    let sets: Vec<Option<Vec<(u32, u32)>>> = items
        .iter()
        .map(|id| {
            let h = html.get(id.as_str())?;
            let s = signer.sign(h).sigs;
            (s.set_len() >= 10).then(|| s.entries().to_vec())
        })
        .collect();
    let want = brute_force(&sets, 0.5);
    assert!(want.len() >= 10, "{want:?}");
    assert_eq!(answer_groups(&answer), want);
    let judged: Vec<usize> = (0..sets.len()).filter(|&i| sets[i].is_some()).collect();
    let refs: Vec<&[(u32, u32)]> = judged
        .iter()
        .map(|&i| sets[i].as_deref().unwrap())
        .collect();
    let lib: BTreeSet<BTreeSet<usize>> = neardup::signature::group(&refs, Measure::Jaccard, 0.5)
        .into_iter()
        .map(|g| g.into_iter().map(|k| judged[k]).collect())
        .collect();
    assert_eq!(lib, want);
    // representatives come first in the given order; members carry their similarity
    for g in answer["groups"].as_array().unwrap() {
        let rep = g["representative"]["item"].as_u64().unwrap() as usize;
        for m in g["members"].as_array().unwrap() {
            let i = m["item"].as_u64().unwrap() as usize;
            assert!(i > rep);
            let sim = similarity(
                sets[i].as_ref().unwrap(),
                sets[rep].as_ref().unwrap(),
                Measure::Jaccard,
            );
            assert!((m["similarity"].as_f64().unwrap() - sim).abs() < 1e-12);
        }
    }
    // a repeated result set comes from the cache, with the same groups
    let (_, again) = http_post_json(port, "/v1/group", &serde_json::json!({ "items": items }));
    assert_eq!(
        again["cached"], false,
        "an answer with unknown ids is not cached"
    );
    let known: Vec<&String> = items.iter().filter(|i| *i != "never-seen").collect();
    let (_, first) = http_post_json(port, "/v1/group", &serde_json::json!({ "items": known }));
    let (_, cached) = http_post_json(port, "/v1/group", &serde_json::json!({ "items": known }));
    assert_eq!(first["cached"], false);
    assert_eq!(cached["cached"], true);
    assert_eq!(cached["groups"], first["groups"]);
    // inline texts group with stored pages
    let text = story_text(3, false).replace("<p>", "").replace("</p>", "");
    let (code, inline) = http_post_json(
        port,
        "/v1/group",
        &serde_json::json!({"items": ["s00003-c0", {"id": "mine", "text": text}], "threshold": 0.5}),
    );
    assert_eq!(code, 200, "{inline}");
    valid(&group_resp, &inline);
    assert_eq!(
        answer_groups(&inline),
        BTreeSet::from([BTreeSet::from([0, 1])]),
        "{inline}"
    );

    // neardup group over a file gives the same answer
    let list: String = items.iter().map(|i| format!("\"{i}\"\n")).collect();
    std::fs::write(d.join("items.jsonl"), list).unwrap();
    let out = output_ok(
        neardup()
            .args(["group", "--input"])
            .arg(d.join("items.jsonl"))
            .arg("--index")
            .arg(&index),
        "neardup group",
    );
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    valid(&group_resp, &cli);
    assert_eq!(answer_groups(&cli), want);
    // ids as arguments
    let out = output_ok(
        neardup()
            .args(["group", "--index"])
            .arg(&index)
            .args(&items),
        "neardup group IDS",
    );
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer_groups(&cli), want);

    // explain: the decision file mode made, the similarity it computed
    for id in &dups {
        let (code, x) = http_get(port, &format!("/v1/explain/{id}")).unwrap();
        assert_eq!(code, 200, "{x}");
        let x: serde_json::Value = serde_json::from_str(&x).unwrap();
        valid(&explain_v, &x);
        let tagged = &decided[*id]["dedup"];
        assert_eq!(x["decision"], "duplicate");
        assert_eq!(x["canonical_id"], tagged["canonical_id"]);
        let stored = x["similarity"].as_f64().unwrap();
        assert!(
            (stored - tagged["similarity"].as_f64().unwrap()).abs() < 5e-4,
            "{x}"
        );
        // recomputed from the stored signatures (the duplicate's rebuilt from its delta)
        let spot = &x["compared"]["methods"][0];
        assert_eq!(spot["method"], "spotsigs");
        assert!(
            (spot["similarity"].as_f64().unwrap() - stored).abs() < 1e-12,
            "{x}"
        );
        assert_eq!(spot["matches"], true);
        // and from the pages signed here
        let (a, b) = (
            signer.sign(html[id.as_str()]).sigs,
            signer
                .sign(html[tagged["canonical_id"].as_str().unwrap()])
                .sigs,
        );
        // (JSON numbers parse to within an ulp)
        let here = similarity(a.entries(), b.entries(), Measure::Jaccard);
        assert!((here - stored).abs() < 1e-12, "{here} {stored}");
    }
    let (code, x) = http_get(port, "/v1/explain/s00001-c0?with=s00002-c0").unwrap();
    assert_eq!(code, 200);
    let x: serde_json::Value = serde_json::from_str(&x).unwrap();
    assert_eq!(x["compared"]["second"], "s00002-c0");
    assert_eq!(x["compared"]["methods"][0]["matches"], false, "{x}");
    // with the pages at hand, signatures are shown as strings
    let out = output_ok(
        neardup()
            .args(["explain", "--index"])
            .arg(&index)
            .arg("--pages")
            .arg(d.join("pages.jsonl"))
            .arg(dups[0]),
        "neardup explain",
    );
    let x: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    valid(&explain_v, &x);
    let shared = x["compared"]["signatures"]["shared"].as_array().unwrap();
    assert!(!shared.is_empty());
    assert!(
        shared.iter().all(|s| s.as_str().unwrap().contains(':')),
        "{x}"
    );

    // bad requests: clear JSON errors, and the process stays up
    let bad: Vec<(&str, &str, Vec<u8>, u16)> = vec![
        ("POST", "/v1/group", b"not json".to_vec(), 400),
        ("POST", "/v1/group", br#"{"items": "s1"}"#.to_vec(), 400),
        (
            "POST",
            "/v1/group",
            br#"{"items": [], "threshold": 1.5}"#.to_vec(),
            400,
        ),
        (
            "POST",
            "/v1/group",
            br#"{"items": [{"text": "a", "html": "b"}]}"#.to_vec(),
            400,
        ),
        (
            "POST",
            "/v1/group",
            serde_json::to_vec(&serde_json::json!({
                "items": (0..10_000).map(|i| format!("id-{i}")).collect::<Vec<_>>()
            }))
            .unwrap(),
            413,
        ),
        ("GET", "/v1/explain/never-seen", vec![], 404),
        ("GET", "/v1/explain/s00001-c0?with=never-seen", vec![], 404),
        ("DELETE", "/v1/group", vec![], 405),
        ("GET", "/v2/anything", vec![], 404),
    ];
    for (method, path, body, status) in bad {
        let (code, text) = http_request(port, method, path, &body).unwrap();
        assert_eq!(code, status, "{method} {path}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"));
        assert_eq!(v["error"]["status"], status, "{text}");
        valid(&error_v, &v);
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
        assert_eq!(http_get(port, "/healthz").unwrap().0, 200);
    }
    // a body announced larger than the limit (8 MiB) is refused before it is sent
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            c,
            "POST /v1/group HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            9 << 20
        )
        .unwrap();
        let mut text = String::new();
        c.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(text.contains("max-body-bytes"), "{text}");
    }
    let metrics = http_get(port, "/metrics").unwrap().1;
    assert!(
        metrics.contains("neardup_serve_requests_total{endpoint=\"group\",status=\"413\"} 2"),
        "{metrics}"
    );

    // the writer goes on: pages decided after the server started are served, at the
    // default catch-up interval
    write_pages(&d.join("more.jsonl"), &pages(100, 5));
    let later = dedup(&d.join("more.jsonl"), &index, &d.join("more-out.jsonl"));
    assert_eq!(later["s00100-c1"]["dedup"]["decision"], "duplicate");
    wait_until(Duration::from_secs(15), "the new pages served", || {
        matches!(http_get(port, "/v1/explain/s00100-c1"), Some((200, _)))
    });

    // SIGTERM: in-flight requests finish, exit 0
    let mut server = server;
    let st = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(server.exit_code(), Some(0));
}

#[test]
fn serving_refuses_what_is_not_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let out = neardup()
        .args(["serve", "--index"])
        .arg(dir.path().join("none"))
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not an index directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = neardup()
        .args(["group", "--input", "/dev/null", "--index"])
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    std::fs::write(dir.path().join("bad.jsonl"), "[1, 2]\n").unwrap();
    let out = neardup()
        .args(["group", "--input"])
        .arg(dir.path().join("bad.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1"));
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
/// The environment a process started with, its name, and whether it blocks SIGTERM.
fn process_state(pid: u32) -> (Vec<String>, String, bool) {
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let env = env
        .split(|&b| b == 0)
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let blocked = status
        .lines()
        .find_map(|l| l.strip_prefix("SigBlk:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap()
        & (1 << (libc::SIGTERM - 1))
        != 0;
    (env, comm.trim_end().to_string(), blocked)
}

/// Without `GLIBC_TUNABLES` the process starts itself again with the allocator's huge
/// pages asked for, under its own name, its stop signals not left blocked; an operator's
/// value is kept as it is. (A SIGTERM at the first moment of start-up, across this exec, is
/// the broker tests' `sigterm_at_any_moment_of_start_up_exits_zero`.)
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_allocator_asks_for_huge_pages_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_pages(&d.join("in.jsonl"), &pages(0, 3));
    let index = d.join("index");
    dedup(&d.join("in.jsonl"), &index, &d.join("out.jsonl"));
    for operator in [None, Some("glibc.malloc.hugetlb=0")] {
        let port = free_port();
        let mut cmd = neardup();
        cmd.args(["serve", "--index"])
            .arg(&index)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_remove("GLIBC_TUNABLES");
        if let Some(v) = operator {
            cmd.env("GLIBC_TUNABLES", v);
        }
        let child = cmd.spawn().unwrap();
        let mut server = Server { child, port };
        wait_until(Duration::from_secs(30), "serve ready", || {
            matches!(http_get(port, "/readyz"), Some((200, _)))
        });
        let (env, comm, blocked) = process_state(server.child.id());
        let tunables: Vec<&String> = env
            .iter()
            .filter(|e| e.starts_with("GLIBC_TUNABLES="))
            .collect();
        match operator {
            Some(v) => assert_eq!(tunables, [&format!("GLIBC_TUNABLES={v}")]),
            // the C library applies the tunables and may leave only some of them in the
            // environment it shows (2.36 keeps the first): what it shows is where ours begin
            None => {
                assert_eq!(tunables.len(), 1, "{tunables:?}");
                let shown = tunables[0].trim_start_matches("GLIBC_TUNABLES=");
                assert!(
                    shown.starts_with("glibc.malloc.hugetlb=1")
                        && neardup::allocator::DEFAULT_TUNABLES.starts_with(shown),
                    "{shown}"
                );
            }
        }
        assert!(!blocked, "SIGTERM left blocked ({operator:?})");
        assert_eq!(comm, "neardup", "the process keeps its name ({operator:?})");
        // and it still stops cleanly on SIGTERM
        // SAFETY: kill(2) on our own child's pid
        assert_eq!(
            unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGTERM) },
            0
        );
        assert_eq!(server.exit_code(), Some(0), "{operator:?}");
    }
}

//! `neardup eval --report`: the page, rendered by a real headless browser, shows the rows
//! eval printed, one precision–recall curve per method, and exactly the false positive and
//! false negative pairs that `neardup dedup` gives on the same pages.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The labelled pages (tests/data/make_eval_pages.py), with their same-template and gray
/// pair lists beside them.
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/eval-pages.jsonl");

const METHODS: [&str; 2] = ["spotsigs", "alg-g"];
const THRESHOLDS: [f64; 2] = [0.5, 0.6];

fn neardup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
}

/// The browser binary; its absence fails the test.
fn chromium() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("chromium"));
    std::iter::once(PathBuf::from("/usr/bin/chromium"))
        .chain(on_path)
        .find(|p| p.is_file())
        .expect("chromium is not installed: run scripts/install-deps.sh")
}

/// Runs headless chromium on a local file with a fresh profile, at most two minutes.
fn browse(page: &Path, extra: &[&str], scratch: &Path) -> Output {
    let profile = tempfile::tempdir_in(scratch).unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = child.wait_with_output().unwrap();
    out.stdout = reader.join().unwrap().into_bytes();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

type Pairs = BTreeSet<(String, String)>;

fn pair(a: &str, b: &str) -> (String, String) {
    if a < b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

fn pairs_within(groups: impl Iterator<Item = Vec<String>>) -> Pairs {
    let mut out = Pairs::new();
    for g in groups {
        for (i, a) in g.iter().enumerate() {
            for b in &g[i + 1..] {
                out.insert(pair(a, b));
            }
        }
    }
    out
}

fn gold() -> Pairs {
    let mut clusters: HashMap<String, Vec<String>> = HashMap::new();
    for line in std::fs::read_to_string(CORPUS).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(c) = v["cluster"].as_str() {
            let id = v["id"].as_str().unwrap().to_string();
            clusters.entry(c.to_string()).or_default().push(id);
        }
    }
    pairs_within(clusters.into_values())
}

/// The pairs `neardup dedup` predicts on the corpus: each duplicate with its canonical page
/// and with the other duplicates of that page.
fn predicted_by_dedup(method: &str, tau: f64, dir: &Path) -> Pairs {
    let work = tempfile::tempdir_in(dir).unwrap();
    let dups = work.path().join("duplicates.jsonl");
    common::output_ok(
        neardup()
            .args(["dedup", "--input", CORPUS, "--method", method])
            .arg(format!("--threshold={tau}"))
            .arg("--index")
            .arg(work.path().join("index"))
            .arg("--unique")
            .arg(work.path().join("unique.jsonl"))
            .arg("--duplicates")
            .arg(&dups),
        "neardup dedup",
    );
    let mut groups: HashMap<String, Vec<String>> = HashMap::new();
    for line in std::fs::read_to_string(&dups).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let canon = v["dedup"]["canonical_id"].as_str().unwrap().to_string();
        let id = v["id"].as_str().unwrap().to_string();
        groups
            .entry(canon.clone())
            .or_insert_with(|| vec![canon])
            .push(id);
    }
    pairs_within(groups.into_values())
}

/// The text of an HTML fragment: tags dropped, the entities the serializer writes decoded.
fn text_of(fragment: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in fragment.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .trim()
        .to_string()
}

/// The cells of each `<tr class="row">` of the rendered table.
fn table_rows(dom: &str) -> Vec<Vec<String>> {
    dom.split("<tr class=\"row\">")
        .skip(1)
        .map(|tr| {
            let tr = &tr[..tr.find("</tr>").unwrap()];
            tr.split("<td>")
                .skip(1)
                .map(|td| text_of(&td[..td.find("</td>").unwrap()]))
                .collect()
        })
        .collect()
}

/// A row of `eval --json` as eval's table prints it.
fn printed_cells(row: &Value) -> Vec<String> {
    let opt = |v: &Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
    vec![
        row["method"].as_str().unwrap().to_string(),
        format!("{:.2}", row["threshold"].as_f64().unwrap()),
        row["predicted"].to_string(),
        row["gold"].to_string(),
        row["true_positives"].to_string(),
        format!("{:.3}", row["precision"].as_f64().unwrap()),
        format!("{:.3}", row["recall"].as_f64().unwrap()),
        format!("{:.3}", row["f1"].as_f64().unwrap()),
        opt(&row["same_template_fp"]),
        opt(&row["gray_predicted"]),
        row["skipped"].to_string(),
        format!("{:.0}", row["decide_pages_per_second"].as_f64().unwrap()),
    ]
}

/// The `(kind, a, b)` pair elements inside one element of the DOM, found by its id.
fn pairs_in_section(dom: &str, id: &str) -> (Pairs, Pairs, String) {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no section {id}"));
    let section = &dom[start..start + dom[start..].find("</section>").unwrap()];
    let (mut fp, mut fneg) = (Pairs::new(), Pairs::new());
    for el in section.split("<div class=\"pair ").skip(1) {
        let attr = |name: &str| {
            let at = el.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            el[at..at + el[at..].find('"').unwrap()].to_string()
        };
        let p = pair(&attr("data-a"), &attr("data-b"));
        match attr("data-kind").as_str() {
            "fp" => assert!(fp.insert(p)),
            "fn" => assert!(fneg.insert(p)),
            k => panic!("pair kind {k}"),
        }
    }
    (fp, fneg, section.to_string())
}

/// Width and height of a PNG, from its header.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn report_renders_the_table_the_curves_and_every_wrong_pair() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let out = common::output_ok(
        neardup()
            .args(["eval", "--corpus", CORPUS, "--json"])
            .arg(format!("--method={}", METHODS.join(",")))
            .arg("--threshold=0.5,0.6")
            .arg("--report")
            .arg(&html),
        "neardup eval --report",
    );
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), METHODS.len() * THRESHOLDS.len());

    // the corpus holds what the report is for: wrong pairs of both kinds, one of them a
    // same-template pair
    let default = &rows[0];
    assert_eq!(
        (default["method"].as_str(), default["threshold"].as_f64()),
        (Some("spotsigs"), Some(0.5))
    );
    let tp = default["true_positives"].as_u64().unwrap();
    assert!(
        default["predicted"].as_u64().unwrap() > tp,
        "no false positive"
    );
    assert!(default["gold"].as_u64().unwrap() > tp, "no false negative");
    assert!(default["same_template_fp"].as_u64().unwrap() >= 1);

    let dom = String::from_utf8(browse(&html, &["--dump-dom"], dir.path()).stdout).unwrap();
    assert!(dom.contains("<h1>neardup eval report</h1>"), "{dom}");

    // the table: the rows eval printed, numbers as printed
    let table = table_rows(&dom);
    assert_eq!(table.len(), rows.len());
    for (cells, row) in table.iter().zip(&rows) {
        assert_eq!(cells[..12], printed_cells(row)[..], "{row}");
    }

    // the curves: one line per method, a point per τ of the grid and the requested ones
    assert_eq!(dom.matches("<svg class=\"curve\"").count(), 1);
    let lines: Vec<&str> = dom
        .split("<polyline class=\"method-curve\" data-method=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(lines, METHODS);
    // each point's title names its τ, or the τ range of the points drawn as one
    for method in METHODS {
        let ranges: Vec<(f64, f64)> = dom
            .split(&format!("<title>{method} τ "))
            .skip(1)
            .map(|s| {
                let label = &s[..s.find(':').unwrap()];
                let (lo, hi) = label.split_once('–').unwrap_or((label, label));
                (lo.parse().unwrap(), hi.parse().unwrap())
            })
            .collect();
        for tau in (30..=90).step_by(5).map(|t| t as f64 / 100.0) {
            assert!(
                ranges.iter().any(|&(lo, hi)| lo <= tau && tau <= hi),
                "{method}: no point for τ {tau} in {ranges:?}"
            );
        }
    }

    // the pairs: for every row, exactly the false positives and negatives of dedup's
    // decisions on the same pages
    let gold = gold();
    for row in &rows {
        let (method, tau) = (
            row["method"].as_str().unwrap(),
            row["threshold"].as_f64().unwrap(),
        );
        let predicted = predicted_by_dedup(method, tau, dir.path());
        assert_eq!(
            predicted.len() as u64,
            row["predicted"].as_u64().unwrap(),
            "{method} {tau}"
        );
        let want_fp: Pairs = predicted.difference(&gold).cloned().collect();
        let want_fn: Pairs = gold.difference(&predicted).cloned().collect();
        let (fp, fneg, section) = pairs_in_section(&dom, &format!("pairs-{method}-{tau:.2}"));
        assert_eq!(fp, want_fp, "false positives of {method} {tau}");
        assert_eq!(fneg, want_fn, "false negatives of {method} {tau}");
        for (title, n) in [
            ("False positives (predicted, not gold)", want_fp.len()),
            ("False negatives (gold, not predicted)", want_fn.len()),
        ] {
            let s = if n == 1 { "" } else { "s" };
            assert!(
                section.contains(&format!("{title}: {n} pair{s}</h3>")),
                "{title}"
            );
        }
    }

    // the same-template false positive is marked, its shared words highlighted and its
    // text escaped (the shop notice quotes markup)
    let (_, _, section) = pairs_in_section(&dom, "pairs-spotsigs-0.50");
    let shop = section
        .split("<div class=\"pair ")
        .find(|p| p.contains("data-a=\"ev-06\" data-b=\"ev-10\""))
        .expect("the shop pages are a false positive");
    assert!(shop.contains("same template"));
    assert!(shop.matches("<mark>").count() > 40);
    assert!(shop.contains("Shared signatures ("));
    assert!(shop.contains("<code>the:harbor:furnitur</code>"), "{shop}");
    let plain = shop
        .replace("<mark class=\"ante\">", "")
        .replace("<mark>", "")
        .replace("</mark>", "");
    assert!(
        plain.contains("use the tags &lt;b&gt; and &lt;i&gt; in a review"),
        "{plain}"
    );
    assert!(plain.contains("links &amp; pictures"));
    assert!(!dom.contains("<script"));
    let jaccard: f64 = {
        let at = shop.find("Jaccard ").unwrap() + 8;
        shop[at..at + 5].parse().unwrap()
    };
    assert!((0.5..1.0).contains(&jaccard), "{jaccard}");

    // a screenshot: a PNG of the window's size with far more on it than a blank page
    let shot = dir.path().join("report.png");
    let blank = dir.path().join("blank.html");
    let blank_shot = dir.path().join("blank.png");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    for (page, png) in [(&html, &shot), (&blank, &blank_shot)] {
        browse(
            page,
            &[
                &format!("--screenshot={}", png.display()),
                "--window-size=1280,2000",
            ],
            dir.path(),
        );
    }
    let (bytes, blank_bytes) = (
        std::fs::read(&shot).unwrap(),
        std::fs::read(&blank_shot).unwrap(),
    );
    assert_eq!(png_size(&bytes), (1280, 2000));
    assert_eq!(png_size(&blank_bytes), (1280, 2000));
    assert!(
        bytes.len() > 10 * blank_bytes.len(),
        "screenshot {} bytes, a blank page {}",
        bytes.len(),
        blank_bytes.len()
    );
}

#[test]
fn report_leaves_the_printed_rows_alone() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |report: Option<&Path>| {
        let mut cmd = neardup();
        cmd.args(["eval", "--corpus", CORPUS, "--json", "--threshold=0.4,0.5"]);
        if let Some(p) = report {
            cmd.arg("--report").arg(p);
        }
        let out = common::output_ok(&mut cmd, "neardup eval");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("decide_pages_per_second");
                v
            })
            .collect::<Vec<_>>()
    };
    let with = rows(Some(&dir.path().join("r.html")));
    assert_eq!(with.len(), 2);
    assert_eq!(with, rows(None));
}

#[test]
fn an_unwritable_report_fails_before_the_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-dir").join("report.html");
    let out = neardup()
        .args(["eval", "--corpus", CORPUS, "--report"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write the report"), "{err}");
    assert!(err.contains("report.html"), "{err}");
    // nothing was evaluated or printed
    assert!(out.stdout.is_empty());
    assert!(!err.contains("pages,"), "{err}");
}

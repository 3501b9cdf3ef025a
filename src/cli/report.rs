//! `neardup eval --report FILE.html`: one self-contained page (inline CSS and SVG, no
//! script, nothing fetched) with the result table, a precision–recall curve per method over
//! a τ grid, and the false positive and false negative pairs of the reported rows: both
//! signed texts side by side, the words of their shared signatures marked.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::signature::annotate::Annotated;
use crate::signature::{similarity, Measure, Signed, Signer};

/// One row of the result table.
#[derive(Debug, Serialize)]
pub struct Row {
    /// Method.
    pub method: String,
    /// Threshold.
    pub threshold: f64,
    /// Predicted pairs.
    pub predicted: usize,
    /// Gold pairs.
    pub gold: usize,
    /// Correct predicted pairs.
    pub true_positives: usize,
    /// Precision.
    pub precision: f64,
    /// Recall.
    pub recall: f64,
    /// F1.
    pub f1: f64,
    /// Predicted pairs among the same-template hard negatives.
    pub same_template_fp: Option<usize>,
    /// Predicted pairs among the gray pairs.
    pub gray_predicted: Option<usize>,
    /// Pages skipped for too few signatures.
    pub skipped: usize,
    /// Decisions per second (index lookups and verification only).
    pub decide_pages_per_second: f64,
    /// Precision and recall by kind of pair (the pages' kinds, one host or not).
    pub by_kind: Vec<KindRow>,
}

/// Precision and recall of one kind of pair.
#[derive(Debug, Clone, Serialize)]
pub struct KindRow {
    /// The pages' kinds (`a` or `a+b`, in order) and `same host` or `other hosts`.
    pub kind: String,
    /// Gold pairs of the kind.
    pub gold: usize,
    /// Predicted pairs of the kind.
    pub predicted: usize,
    /// Predicted and gold.
    pub true_positives: usize,
    /// Precision (1 when nothing was predicted).
    pub precision: f64,
    /// Recall (1 when there is no gold pair).
    pub recall: f64,
}

/// Pairs shown at most in each list (false positives, false negatives) of a row.
pub const MAX_PAIRS: usize = 500;

/// Requested rows whose pairs are shown; with more rows, only the first row's.
pub const MAX_PAIR_ROWS: usize = 4;

type Pair = (u32, u32);

/// The thresholds the curves add to the requested ones: 0.30, 0.35, …, 0.90.
pub fn grid(requested: &[f64]) -> Vec<f64> {
    (30..=90)
        .step_by(5)
        .map(|t| t as f64 / 100.0)
        .filter(|t| !requested.iter().any(|r| (r - t).abs() < 1e-9))
        .collect()
}

/// A page of the corpus as the report names it.
pub struct Page<'a> {
    /// Id.
    pub id: &'a str,
    /// URL.
    pub url: &'a str,
    /// Gold cluster label.
    pub cluster: Option<&'a str>,
}

/// What the page is made from besides the collected rows.
pub struct Inputs<'a> {
    /// The corpus file.
    pub corpus: &'a Path,
    /// The requested rows, as `eval` printed them.
    pub rows: &'a [Row],
    /// The pages, in file order.
    pub pages: &'a [Page<'a>],
    /// Their signing results.
    pub signed: &'a [Signed],
    /// The signer that made them.
    pub signer: &'a Signer,
    /// Same-template (hard negative) pairs, if known.
    pub same_template: Option<&'a HashSet<Pair>>,
    /// Gray pairs, if known.
    pub gray: Option<&'a HashSet<Pair>>,
}

struct Point {
    method: String,
    tau: f64,
    precision: f64,
    recall: f64,
    requested: bool,
}

struct Section {
    method: String,
    tau: f64,
    /// Predicted, not gold, in page order.
    false_pos: Vec<Pair>,
    /// Gold, not predicted, in page order.
    false_neg: Vec<Pair>,
    /// Pages of the row skipped for too few signatures.
    skipped: HashSet<u32>,
    /// Precision and recall by kind of pair.
    by_kind: Vec<KindRow>,
}

/// The report of one `eval` run: the file is created first, so a path that cannot be
/// written fails before the evaluation, then rows are added, then it is written.
pub struct Report {
    path: PathBuf,
    file: File,
    requested_rows: usize,
    points: Vec<Point>,
    sections: Vec<Section>,
}

impl Report {
    /// Creates `path` for a run of `requested_rows` rows (methods × thresholds).
    pub fn create(path: &Path, requested_rows: usize) -> Result<Report> {
        let file = File::create(path)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
        Ok(Report {
            path: path.to_path_buf(),
            file,
            requested_rows,
            points: Vec::new(),
            sections: Vec::new(),
        })
    }

    /// Adds one evaluated method × threshold: a point of its curve and, for a requested
    /// row among the first [`MAX_PAIR_ROWS`] (the first only when there are more), its
    /// false positives and false negatives.
    pub fn add(
        &mut self,
        row: &Row,
        requested: bool,
        predicted: &HashSet<Pair>,
        gold: &HashSet<Pair>,
        skipped: &HashSet<u32>,
    ) {
        self.points.push(Point {
            method: row.method.clone(),
            tau: row.threshold,
            precision: row.precision,
            recall: row.recall,
            requested,
        });
        let limit = if self.requested_rows <= MAX_PAIR_ROWS {
            MAX_PAIR_ROWS
        } else {
            1
        };
        if !requested || self.sections.len() >= limit {
            return;
        }
        let mut false_pos: Vec<Pair> = predicted.difference(gold).copied().collect();
        let mut false_neg: Vec<Pair> = gold.difference(predicted).copied().collect();
        false_pos.sort_unstable();
        false_neg.sort_unstable();
        self.sections.push(Section {
            method: row.method.clone(),
            tau: row.threshold,
            false_pos,
            false_neg,
            skipped: skipped.clone(),
            by_kind: row.by_kind.clone(),
        });
    }

    /// Renders the page and writes it.
    pub fn write(mut self, inputs: &Inputs) -> Result<()> {
        let html = self.render(inputs);
        self.file
            .write_all(html.as_bytes())
            .and_then(|_| self.file.flush())
            .with_context(|| format!("cannot write the report {}", self.path.display()))
    }

    fn render(&self, inp: &Inputs) -> String {
        let mut h = String::with_capacity(1 << 16);
        let gold = inp.rows.first().map_or(0, |r| r.gold);
        h.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
             <title>neardup eval report</title>\n<style>",
        );
        h.push_str(CSS);
        h.push_str("</style></head><body>\n<h1>neardup eval report</h1>\n");
        let _ = writeln!(
            h,
            "<p class=\"lead\">Corpus <code>{}</code>: {} pages, {} gold pairs. neardup {}; \
             each row ran the pages in file order through a fresh index.</p>",
            esc(&inp.corpus.display().to_string()),
            inp.pages.len(),
            gold,
            env!("CARGO_PKG_VERSION"),
        );
        self.render_table(&mut h, inp);
        self.render_curve(&mut h);
        self.render_sections(&mut h, inp);
        h.push_str("</body></html>\n");
        h
    }

    fn render_table(&self, h: &mut String, inp: &Inputs) {
        h.push_str(
            "<h2 id=\"table\">Precision, recall, F1</h2>\n<table class=\"results\">\
             <thead><tr><th>method</th><th>τ</th><th>predicted</th><th>gold</th><th>tp</th>\
             <th>precision</th><th>recall</th><th>F1</th><th>same-tmpl-fp</th><th>gray</th>\
             <th>skipped</th><th>decisions/s</th><th>pairs</th></tr></thead><tbody>\n",
        );
        let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
        for r in inp.rows {
            let pairs = match self.section_of(&r.method, r.threshold) {
                Some(id) => format!("<a href=\"#{id}\">below</a>"),
                None => "not shown".to_string(),
            };
            let _ = writeln!(
                h,
                "<tr class=\"row\"><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{:.0}</td><td>{pairs}</td></tr>",
                esc(&r.method),
                r.threshold,
                r.predicted,
                r.gold,
                r.true_positives,
                r.precision,
                r.recall,
                r.f1,
                opt(r.same_template_fp),
                opt(r.gray_predicted),
                r.skipped,
                r.decide_pages_per_second,
            );
        }
        h.push_str(
            "</tbody></table>\n<p class=\"note\">same-tmpl-fp: predicted pairs among the \
             same-template hard negatives; gray: among the negatives whose texts overlap \
             (\"-\": no such list beside the corpus); skipped: pages with too few distinct \
             signatures; decisions/s: index lookups and verification only.</p>\n",
        );
    }

    fn section_of(&self, method: &str, tau: f64) -> Option<String> {
        self.sections
            .iter()
            .find(|s| s.method == method && s.tau == tau)
            .map(|s| format!("pairs-{}-{:.2}", s.method, s.tau))
    }

    fn render_curve(&self, h: &mut String) {
        const W: f64 = 760.0;
        const H: f64 = 500.0;
        const LEFT: f64 = 60.0;
        const RIGHT: f64 = 170.0;
        const TOP: f64 = 20.0;
        const BOTTOM: f64 = 50.0;
        let mut methods: Vec<&str> = Vec::new();
        for p in &self.points {
            if !methods.contains(&p.method.as_str()) {
                methods.push(&p.method);
            }
        }
        let low = self
            .points
            .iter()
            .flat_map(|p| [p.precision, p.recall])
            .fold(1.0f64, f64::min);
        // both axes from a tenth below the lowest value to 1
        let lo = (((low - 0.02) * 10.0).floor() / 10.0).clamp(0.0, 0.9);
        let step = if 1.0 - lo <= 0.3 { 0.05 } else { 0.1 };
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let x = |v: f64| LEFT + (v - lo) / (1.0 - lo) * pw;
        let y = |v: f64| TOP + (1.0 - (v - lo) / (1.0 - lo)) * ph;
        h.push_str("<h2 id=\"curve\">Precision–recall over τ</h2>\n");
        let _ = writeln!(
            h,
            "<p class=\"note\">One line per method, one point per threshold (labelled with τ; \
             the requested thresholds drawn larger), each a fresh index over the whole corpus: \
             τ = 0.30, 0.35, …, 0.90 and the requested ones.</p>\n\
             <svg class=\"curve\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" \
             height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" \
             aria-label=\"precision against recall per method\">"
        );
        let ticks = ((1.0 - lo) / step).round() as usize;
        for i in 0..=ticks {
            let v = lo + step * i as f64;
            let _ = writeln!(
                h,
                "<line class=\"grid\" x1=\"{0:.1}\" y1=\"{TOP}\" x2=\"{0:.1}\" y2=\"{1:.1}\"/>\
                 <line class=\"grid\" x1=\"{LEFT}\" y1=\"{2:.1}\" x2=\"{3:.1}\" y2=\"{2:.1}\"/>\
                 <text class=\"tick\" x=\"{0:.1}\" y=\"{4:.1}\" text-anchor=\"middle\">{v:.2}</text>\
                 <text class=\"tick\" x=\"{5:.1}\" y=\"{6:.1}\" text-anchor=\"end\">{v:.2}</text>",
                x(v),
                TOP + ph,
                y(v),
                LEFT + pw,
                TOP + ph + 16.0,
                LEFT - 6.0,
                y(v) + 4.0,
            );
        }
        let _ = writeln!(
            h,
            "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\"/>\
             <line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{0}\"/>\
             <text class=\"label\" x=\"{2}\" y=\"{3}\" text-anchor=\"middle\">recall</text>\
             <text class=\"label\" transform=\"translate(16 {4}) rotate(-90)\" \
             text-anchor=\"middle\">precision</text>",
            TOP + ph,
            LEFT + pw,
            LEFT + pw / 2.0,
            H - 10.0,
            TOP + ph / 2.0,
        );
        // labels of points drawn at one place by several methods are stacked, not overlaid
        let mut labels_at: HashMap<(i64, i64), u32> = HashMap::new();
        for (m, method) in methods.iter().enumerate() {
            let color = PALETTE[m % PALETTE.len()];
            let mut pts: Vec<&Point> = self.points.iter().filter(|p| p.method == *method).collect();
            pts.sort_by(|a, b| a.tau.total_cmp(&b.tau));
            // points at the same place (thresholds that change no decision)
            // are drawn once, labelled with their τ range
            let mut merged: Vec<(f64, f64, f64, f64, bool)> = Vec::new();
            for p in pts {
                match merged.last_mut() {
                    Some(l) if l.2 == p.precision && l.3 == p.recall => {
                        l.1 = p.tau;
                        l.4 |= p.requested;
                    }
                    _ => merged.push((p.tau, p.tau, p.precision, p.recall, p.requested)),
                }
            }
            let line: Vec<String> = merged
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.3), y(p.2)))
                .collect();
            let _ = writeln!(
                h,
                "<polyline class=\"method-curve\" data-method=\"{}\" fill=\"none\" \
                 stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
                esc(method),
                line.join(" ")
            );
            for &(t0, t1, p, r, req) in &merged {
                let label = if t0 == t1 {
                    format!("{t0:.2}")
                } else {
                    format!("{t0:.2}–{t1:.2}")
                };
                let stacked = labels_at
                    .entry((x(r).round() as i64, y(p).round() as i64))
                    .or_insert(0);
                let label_y = y(p) - 5.0 + 12.0 * *stacked as f64;
                *stacked += 1;
                let _ = writeln!(
                    h,
                    "<g class=\"point\"><title>{} τ {label}: precision {p:.3}, recall {r:.3}</title>\
                     <circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{}\" fill=\"{color}\"/>\
                     <text class=\"tau\" fill=\"{color}\" x=\"{:.1}\" y=\"{:.1}\">{label}</text></g>",
                    esc(method),
                    x(r),
                    y(p),
                    if req { 5.5 } else { 3.0 },
                    x(r) + 6.0,
                    label_y,
                );
            }
            let ly = TOP + 10.0 + 22.0 * m as f64;
            let lx = LEFT + pw + 20.0;
            let _ = writeln!(
                h,
                "<g class=\"legend\"><line x1=\"{lx}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" \
                 stroke=\"{color}\" stroke-width=\"3\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
                lx + 26.0,
                lx + 32.0,
                ly + 4.0,
                esc(method)
            );
        }
        h.push_str("</svg>\n");
    }

    fn render_sections(&self, h: &mut String, inp: &Inputs) {
        h.push_str("<h2 id=\"pairs\">Pairs</h2>\n<p class=\"note\">");
        let requested: Vec<String> = inp
            .rows
            .iter()
            .map(|r| format!("{} τ {:.2}", esc(&r.method), r.threshold))
            .collect();
        if self.sections.len() < inp.rows.len() {
            let _ = write!(
                h,
                "{} rows were requested ({}); the pairs of the first only are shown (pairs are \
                 shown for every row up to {MAX_PAIR_ROWS} rows). ",
                inp.rows.len(),
                requested.join(", ")
            );
        } else {
            let _ = write!(
                h,
                "Pairs of every requested row ({}). ",
                requested.join(", ")
            );
        }
        h.push_str(
            "Each pair shows both pages' signed text (the main region, the blocks the signer \
             used, one a line) with the words of their shared signatures marked \
             (<mark>chain words</mark>, <mark class=\"ante\">antecedents</mark>), then the \
             shared signature strings. Similarity: set Jaccard |A ∩ B| / |A ∪ B| over the two \
             pages' distinct signature hashes, recomputed here from their signatures (the \
             decision itself is the index's: a false negative can reach τ when the stream \
             order made it match neither copy's canonical page). Pairs are in page order; at \
             most ",
        );
        let _ = writeln!(h, "{MAX_PAIRS} of each list are drawn.</p>");
        let mut annotated: HashMap<u32, Annotated> = HashMap::new();
        for s in &self.sections {
            let id = format!("pairs-{}-{:.2}", s.method, s.tau);
            let _ = writeln!(
                h,
                "<section class=\"rowpairs\" id=\"{}\"><h2>{} τ {:.2}</h2>",
                esc(&id),
                esc(&s.method),
                s.tau
            );
            h.push_str(
                "<h3>By kind of pair</h3>\n<table class=\"results\"><thead><tr><th>kind</th>\
                 <th>gold</th><th>predicted</th><th>tp</th><th>precision</th><th>recall</th>\
                 </tr></thead><tbody>\n",
            );
            for k in &s.by_kind {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
                    esc(&k.kind),
                    k.gold,
                    k.predicted,
                    k.true_positives,
                    k.precision,
                    k.recall
                );
            }
            h.push_str("</tbody></table>\n");
            for (kind, list, title) in [
                ("fp", &s.false_pos, "False positives (predicted, not gold)"),
                ("fn", &s.false_neg, "False negatives (gold, not predicted)"),
            ] {
                let _ = writeln!(
                    h,
                    "<h3 id=\"{}-{kind}\">{title}: {} pair{}</h3>",
                    esc(&id),
                    list.len(),
                    if list.len() == 1 { "" } else { "s" }
                );
                if list.len() > MAX_PAIRS {
                    let _ = writeln!(
                        h,
                        "<p class=\"cap\">Only the first {MAX_PAIRS} of these {} pairs are drawn \
                         (page order); {} are left out.</p>",
                        list.len(),
                        list.len() - MAX_PAIRS
                    );
                }
                if list.is_empty() {
                    h.push_str("<p class=\"note\">None.</p>\n");
                }
                for &(a, b) in list.iter().take(MAX_PAIRS) {
                    for p in [a, b] {
                        annotated
                            .entry(p)
                            .or_insert_with(|| inp.signer.annotate(&inp.signed[p as usize].text));
                    }
                    render_pair(h, inp, kind, (a, b), &annotated, &s.skipped);
                }
            }
            h.push_str("</section>\n");
        }
    }
}

/// One pair: a head line, the two texts side by side, the shared signatures.
fn render_pair(
    h: &mut String,
    inp: &Inputs,
    kind: &str,
    (a, b): Pair,
    annotated: &HashMap<u32, Annotated>,
    skipped: &HashSet<u32>,
) {
    let (sa, sb) = (&inp.signed[a as usize].sigs, &inp.signed[b as usize].sigs);
    let jaccard = similarity(sa.entries(), sb.entries(), Measure::Jaccard);
    let hb: HashSet<u32> = sb.hashes().collect();
    let shared: HashSet<u32> = sa.hashes().filter(|x| hb.contains(x)).collect();
    let union = sa.set_len() + sb.set_len() - shared.len();
    let (pa, pb) = (&inp.pages[a as usize], &inp.pages[b as usize]);
    let _ = write!(
        h,
        "<div class=\"pair {kind}\" data-kind=\"{kind}\" data-a=\"{}\" data-b=\"{}\">\
         <div class=\"head\"><span class=\"ids\">{} × {}</span> \
         <span class=\"sim\">Jaccard {jaccard:.3}</span> <span class=\"count\">({} shared of \
         {union} distinct signatures)</span>",
        esc(pa.id),
        esc(pb.id),
        esc(pa.id),
        esc(pb.id),
        shared.len(),
    );
    if inp.same_template.is_some_and(|s| s.contains(&(a, b))) {
        h.push_str(" <span class=\"badge tmpl\">same template</span>");
    }
    if inp.gray.is_some_and(|g| g.contains(&(a, b))) {
        h.push_str(" <span class=\"badge gray\">gray</span>");
    }
    h.push_str("</div><div class=\"sides\">");
    for p in [a, b] {
        let page = &inp.pages[p as usize];
        let ann = &annotated[&p];
        let _ = write!(
            h,
            "<div class=\"side\"><div class=\"meta\"><b>{}</b> · cluster {} · {} words, {} \
             distinct signatures",
            esc(page.id),
            page.cluster
                .map_or("<i>none</i>".to_string(), |c| format!("<b>{}</b>", esc(c))),
            ann.words.len(),
            inp.signed[p as usize].sigs.set_len(),
        );
        if skipped.contains(&p) {
            h.push_str(" <span class=\"badge skip\">skipped</span>");
        }
        let _ = write!(
            h,
            "<div class=\"url\">{}</div></div><div class=\"text\">",
            esc(page.url)
        );
        marked_text(h, ann, &shared);
        h.push_str("</div></div>");
    }
    h.push_str("</div>");
    let mut seen = HashSet::new();
    let strings: Vec<&str> = annotated[&a]
        .spots
        .iter()
        .filter(|s| shared.contains(&s.hash) && seen.insert(s.hash))
        .map(|s| s.string.as_str())
        .collect();
    let _ = write!(
        h,
        "<div class=\"sigs\"><b>Shared signatures ({}):</b> ",
        strings.len()
    );
    for s in strings {
        let _ = write!(h, "<code>{}</code> ", esc(s));
    }
    h.push_str("</div></div>\n");
}

/// The signed text, escaped, with the words of shared signatures in `<mark>`.
fn marked_text(h: &mut String, ann: &Annotated, shared: &HashSet<u32>) {
    // 1: a chain word of a shared signature, 2: only its antecedent
    let mut mark = vec![0u8; ann.words.len()];
    for spot in ann.spots.iter().filter(|s| shared.contains(&s.hash)) {
        for (i, &t) in spot.tokens.iter().enumerate() {
            let m = &mut mark[t as usize];
            *m = if i == 0 && *m != 1 { 2 } else { 1 };
        }
    }
    let mut at = 0usize;
    for (&(s, e), &m) in ann.words.iter().zip(&mark) {
        if m == 0 {
            continue;
        }
        let (s, e) = (s as usize, e as usize);
        h.push_str(&esc(&ann.text[at..s]));
        h.push_str(if m == 1 {
            "<mark>"
        } else {
            "<mark class=\"ante\">"
        });
        h.push_str(&esc(&ann.text[s..e]));
        h.push_str("</mark>");
        at = e;
    }
    h.push_str(&esc(&ann.text[at..]));
}

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const PALETTE: [&str; 6] = [
    "#1f6fb4", "#c8322b", "#2f9a3a", "#8a4fbf", "#e07b12", "#6b4a3a",
];

const CSS: &str = "
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 24px; color: #1b1b1b; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
code { font: 12px ui-monospace, 'DejaVu Sans Mono', monospace; }
.lead, .note { color: #444; max-width: 1100px; }
.cap { color: #8a1c00; font-weight: 600; }
table.results { border-collapse: collapse; }
table.results th, table.results td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
table.results th:first-child, table.results td:first-child { text-align: left; }
table.results thead { background: #f0f0f0; }
svg.curve { border: 1px solid #ddd; background: #fff; }
svg .grid { stroke: #eee; }
svg .axis { stroke: #555; }
svg .tick { font-size: 11px; fill: #555; }
svg .label { font-size: 13px; fill: #222; }
svg .tau { font-size: 10px; }
svg .legend text { font-size: 13px; }
.pair { border: 1px solid #ccc; border-radius: 4px; margin: 10px 0 16px; padding: 8px; }
.pair.fp { border-left: 5px solid #c8322b; }
.pair.fn { border-left: 5px solid #1f6fb4; }
.head { margin-bottom: 6px; }
.ids { font-weight: 600; }
.sim { font-weight: 600; margin-left: 8px; }
.count { color: #555; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font-size: 12px; color: #fff; }
.badge.tmpl { background: #b3261e; }
.badge.gray { background: #777; }
.badge.skip { background: #a66b00; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; }
.side { min-width: 0; }
.meta { font-size: 12px; color: #333; margin-bottom: 4px; }
.url { color: #555; word-break: break-all; }
.text { white-space: pre-wrap; border: 1px solid #e3e3e3; background: #fafafa; padding: 6px;
  max-height: 360px; overflow: auto; font-size: 13px; }
mark { background: #ffe066; padding: 0; }
mark.ante { background: #fff3bf; }
.sigs { margin-top: 6px; font-size: 12px; max-height: 120px; overflow: auto; }
.sigs code { background: #f3f3f3; padding: 0 3px; margin-right: 2px; }
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn grid_leaves_out_requested_thresholds() {
        let g = grid(&[0.5, 0.42]);
        assert_eq!(g.len(), 12);
        assert!(!g.iter().any(|&t| (t - 0.5).abs() < 1e-9));
        assert_eq!(g.first(), Some(&0.30));
        assert_eq!(g.last(), Some(&0.90));
    }

    #[test]
    fn lists_over_the_cap_say_how_many_are_left_out() {
        let signer = Signer::new(&crate::signature::SignatureConfig::default()).unwrap();
        let n = 34u32; // 561 pairs
        let signed: Vec<Signed> = (0..n)
            .map(|i| signer.sign(&format!("<p>The page {i} of the river story.</p>")))
            .collect();
        let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let pages: Vec<Page> = ids
            .iter()
            .map(|id| Page {
                id,
                url: "https://example.test/<a>",
                cluster: None,
            })
            .collect();
        let predicted: HashSet<Pair> = (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .collect();
        let row = Row {
            method: "spotsigs".into(),
            threshold: 0.5,
            predicted: predicted.len(),
            gold: 0,
            true_positives: 0,
            precision: 0.0,
            recall: 1.0,
            f1: 0.0,
            same_template_fp: None,
            gray_predicted: None,
            skipped: 0,
            decide_pages_per_second: 1.0,
            by_kind: vec![super::KindRow {
                kind: "page, same host".into(),
                gold: 0,
                predicted: predicted.len(),
                true_positives: 0,
                precision: 0.0,
                recall: 1.0,
            }],
        };
        let dir = tempfile::tempdir().unwrap();
        let mut report = Report::create(&dir.path().join("r.html"), 1).unwrap();
        report.add(&row, true, &predicted, &HashSet::new(), &HashSet::new());
        let h = report.render(&Inputs {
            corpus: Path::new("corpus.jsonl"),
            rows: std::slice::from_ref(&row),
            pages: &pages,
            signed: &signed,
            signer: &signer,
            same_template: None,
            gray: None,
        });
        assert!(
            h.contains("<td>page, same host</td><td>0</td><td>561</td>"),
            "the table by kind"
        );
        assert!(h.contains("False positives (predicted, not gold): 561 pairs"));
        assert!(h.contains(
            "Only the first 500 of these 561 pairs are drawn (page order); 61 are left out."
        ));
        assert_eq!(h.matches("<div class=\"pair fp\"").count(), MAX_PAIRS);
        assert!(h.contains("data-a=\"p0\" data-b=\"p1\""));
        assert!(h.contains("https://example.test/&lt;a&gt;"));
        assert!(!h.contains("/<a>"));
    }

    #[test]
    fn marks_the_words_of_shared_signatures_only() {
        // SpotSigs chains (this short text would otherwise be signed by its word shingles)
        let signer = Signer::new(&crate::signature::SignatureConfig {
            short_shingle: 0,
            ..Default::default()
        })
        .unwrap();
        let a = signer.sign(
            "<p>The river rose in the night and the council met at dawn to <b>discuss</b> \
             the flood & the barrier.</p>",
        );
        let ann = signer.annotate(&a.text);
        let shared: HashSet<u32> = ann
            .spots
            .iter()
            .filter(|s| s.string.starts_with("the:council"))
            .map(|s| s.hash)
            .collect();
        assert_eq!(shared.len(), 1);
        let mut h = String::new();
        marked_text(&mut h, &ann, &shared);
        assert!(
            h.contains("and <mark class=\"ante\">the</mark> <mark>council</mark> <mark>met</mark>"),
            "{h}"
        );
        assert!(h.contains("flood &amp; the barrier."), "{h}");
        assert_eq!(h.matches("<mark").count(), 3);
    }
}

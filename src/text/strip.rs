//! Markup stripping: the visible text of a page as blocks.
//!
//! Two implementations produce the same [`Stripped`] value:
//!
//! - [`StripMode::Tokens`] (default): html5ever's tokenizer with a token sink that keeps
//!   text outside `script`, `style`, `noscript`, `template`, `svg`, `math`, `iframe` and
//!   `head` (except `<title>`). No tree is built, so the cost is linear in the input and deep
//!   nesting costs nothing.
//! - [`StripMode::Tree`]: `scraper` parses the document into a tree (the HTML5 tree-building
//!   rules: implied tags, misnesting repair) and the visible text nodes are walked without
//!   recursion.
//!
//! Block elements (paragraphs, headings, list items, table cells, `<br>`, …) start and end
//! blocks; block boundaries are sentence boundaries for the sentence shingles and chain
//! boundaries for SpotSigs. Entities are decoded, whitespace is folded to one space. Text
//! inside links is counted per block (`link_bytes`) so navigation blocks can be told apart.
//! Input larger than [`StripOptions::max_bytes`] is cut at that size (on a char boundary).

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer as HtmlTokenizer,
    TokenizerOpts,
};

/// What kind of element a block of text came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// The document `<title>`.
    Title,
    /// `h1` … `h6`.
    Heading,
    /// `<p>`.
    Paragraph,
    /// `<li>`, `<dt>`, `<dd>`.
    ListItem,
    /// `<td>`, `<th>`, `<caption>`.
    Cell,
    /// Any other block (`div`, `section`, text between `<br>`s, …).
    Text,
}

/// One block of visible text: a byte range of [`Stripped::text`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Element kind the block came from.
    pub kind: BlockKind,
    /// Start byte offset in [`Stripped::text`].
    pub start: u32,
    /// End byte offset (exclusive).
    pub end: u32,
    /// Bytes of the block that were inside `<a>` elements.
    pub link_bytes: u32,
    /// Words of the block (whitespace-separated runs).
    pub words: u32,
    /// Words of the block inside `<a>` elements.
    pub link_words: u32,
    /// Tags seen since the previous block ended, including those inside this block.
    pub tags: u32,
    /// What the enclosing containers say of the block ([`container_weight`]): −1 inside
    /// boilerplate (comments, popups, …) or a small layout container (footer, sidebar, …),
    /// else +1 inside a content container (article, post body, …), else 0.
    pub context: i32,
}

/// The visible text of a page: blocks joined by `\n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stripped {
    /// Block texts joined by `\n` (whitespace folded, no empty blocks).
    pub text: String,
    /// The blocks, in document order.
    pub blocks: Vec<Block>,
    /// Whether the input was cut at [`StripOptions::max_bytes`].
    pub truncated: bool,
}

impl Stripped {
    /// The text of one block.
    pub fn block_text(&self, block: &Block) -> &str {
        &self.text[block.start as usize..block.end as usize]
    }

    /// Iterates over `(block, text)`.
    pub fn iter(&self) -> impl Iterator<Item = (&Block, &str)> {
        self.blocks.iter().map(move |b| (b, self.block_text(b)))
    }
}

/// The main text region of a page (Body Text Extraction, Finn et al. 2001): the contiguous
/// run of blocks that maximises words outside links minus tags and link words, so the long,
/// tag-sparse article wins over menus, teasers and footers. Blocks inside containers with a
/// negative hint count against a region, blocks inside positive ones count double.
/// Returns a block index range.
pub fn main_region(blocks: &[Block]) -> std::ops::Range<usize> {
    let (mut best, mut best_range) = (i64::MIN, 0..0);
    let (mut run, mut run_start) = (0i64, 0usize);
    for (i, b) in blocks.iter().enumerate() {
        let plain = b.words.saturating_sub(b.link_words) as i64;
        let score = match b.context {
            c if c < 0 => -(b.words as i64) - b.tags as i64,
            0 => plain - b.link_words as i64 - b.tags as i64,
            _ => 2 * plain - b.link_words as i64 - b.tags as i64,
        };
        if run <= 0 {
            run = 0;
            run_start = i;
        }
        run += score;
        if run > best {
            best = run;
            best_range = run_start..i + 1;
        }
    }
    best_range
}

/// Which stripping implementation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StripMode {
    /// html5ever tokenizer, no tree (fast, linear).
    #[default]
    Tokens,
    /// scraper tree (HTML5 tree-building rules).
    Tree,
}

/// Options of [`strip`].
#[derive(Clone, Copy, Debug)]
pub struct StripOptions {
    /// Implementation.
    pub mode: StripMode,
    /// Input bytes considered at most; the rest is ignored and `truncated` is set.
    pub max_bytes: usize,
}

impl Default for StripOptions {
    fn default() -> Self {
        StripOptions {
            mode: StripMode::Tokens,
            max_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Strips the markup of `html` (any text: HTML, plain text or junk) into text blocks.
pub fn strip(html: &str, opts: &StripOptions) -> Stripped {
    let (input, truncated) = cut(html, opts.max_bytes);
    let input = tame_tags(input);
    let mut out = match opts.mode {
        StripMode::Tokens => strip_tokens(&input),
        StripMode::Tree => strip_tree(&input),
    };
    out.truncated = truncated;
    out
}

/// The longest start tag kept whole, in bytes. Longer ones are cut to this length: a tag holds
/// no visible text, and the tokenizer checks each new attribute of a tag against all earlier
/// ones, so a tag with a million attributes would cost minutes.
pub const MAX_TAG_BYTES: usize = 64 * 1024;

/// Cuts every tag (a `<` followed by a letter or `/`, up to the next `>`) longer than
/// [`MAX_TAG_BYTES`]; an unterminated one at the end is cut likewise. Linear; borrows when
/// nothing is cut (every normal page).
pub fn tame_tags(html: &str) -> std::borrow::Cow<'_, str> {
    let b = html.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `html` already handled in `out`
    let mut at = 0;
    let mut next_gt: Option<usize> = None; // a known `>` position ≥ at (None: none left)
    let mut gt_known = false;
    while let Some(off) = memchr::memchr(b'<', &b[at..]) {
        let lt = at + off;
        at = lt + 1;
        match b.get(lt + 1) {
            Some(c) if c.is_ascii_alphabetic() || *c == b'/' => {}
            _ => continue,
        }
        if !gt_known || next_gt.is_some_and(|g| g < lt) {
            next_gt = memchr::memchr(b'>', &b[lt..]).map(|g| lt + g);
            gt_known = true;
        }
        let end = next_gt.unwrap_or(b.len());
        if end - lt <= MAX_TAG_BYTES {
            continue;
        }
        let mut keep = lt + MAX_TAG_BYTES;
        while !html.is_char_boundary(keep) {
            keep -= 1;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
        o.push_str(&html[copied..keep]);
        copied = end; // resume at the `>` (or the end)
        at = end.max(at);
    }
    match out {
        None => std::borrow::Cow::Borrowed(html),
        Some(mut o) => {
            o.push_str(&html[copied..]);
            std::borrow::Cow::Owned(o)
        }
    }
}

fn cut(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// The largest share of a page's words a negative container may hold and still be
/// treated as boilerplate (see `Builder::assign_contexts`).
const MAX_BOILERPLATE_SHARE: f64 = 0.5;

/// Class and id words that name boilerplate content (comments, consent notices, popups,
/// ads, share bars, …): a container with one is boilerplate whatever its size.
const BOILERPLATE_HINTS: &[&str] = &[
    "ad",
    "ads",
    "advert",
    "advertisement",
    "breadcrumb",
    "breadcrumbs",
    "comment",
    "commenting",
    "commentlist",
    "comments",
    "consent",
    "cookie",
    "cookies",
    "disqus",
    "gdpr",
    "modal",
    "newsletter",
    "pagination",
    "popup",
    "promo",
    "recommended",
    "related",
    "share",
    "sharing",
    "signup",
    "social",
    "sponsor",
    "sponsored",
    "subscribe",
    "subscription",
];
/// Class and id words that name page layout around the content (footer, sidebar, menu, …):
/// boilerplate too, unless the container holds most of the page (a layout wrapper).
const LAYOUT_HINTS: &[&str] = &[
    "banner",
    "footer",
    "masthead",
    "menu",
    "nav",
    "navbar",
    "navigation",
    "pager",
    "sidebar",
    "toolbar",
];
const POSITIVE_HINTS: &[&str] = &[
    "article",
    "articlebody",
    "body",
    "content",
    "entry",
    "hentry",
    "main",
    "post",
    "story",
    "text",
];

/// Hint of a boilerplate container ([`container_weight`]).
pub const BOILERPLATE: i32 = -2;
/// Hint of a layout container ([`container_weight`]).
pub const LAYOUT: i32 = -1;
/// Hint of a content container ([`container_weight`]).
pub const CONTENT: i32 = 1;

/// Whether a class or id word is a hint (ASCII case-insensitive, whole words only: a
/// prefix rule would read Drupal's `node--promoted` as a promo).
fn matches_hint(word: &str, hint: &str) -> bool {
    word.eq_ignore_ascii_case(hint)
}

/// Content hint of a container element, from its tag and its class and id words (split on
/// non-alphanumerics): [`BOILERPLATE`] for a `dialog` or a boilerplate word (comment,
/// cookie, popup, …), else [`LAYOUT`] for `nav`, `aside`, `footer`, `form` or a layout
/// word (footer, sidebar, menu, …), else [`CONTENT`] for `article`, `main` or a content
/// word (article, content, post, …), else 0. Negative hints win over positive ones
/// (`comments-body` is boilerplate). Returns `None` for elements that are not containers.
pub fn container_weight<'a>(
    name: &str,
    attrs: impl Iterator<Item = (&'a str, &'a str)>,
) -> Option<i32> {
    let tag = container_tag_weight(name)?;
    let (mut pos, mut layout, mut boilerplate) = (tag > 0, tag == LAYOUT, tag == BOILERPLATE);
    let any = |list: &[&str], w: &str| list.iter().any(|h| matches_hint(w, h));
    for (k, v) in attrs {
        if k != "class" && k != "id" {
            continue;
        }
        for word in v
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            boilerplate |= any(BOILERPLATE_HINTS, word);
            layout |= any(LAYOUT_HINTS, word);
            pos |= any(POSITIVE_HINTS, word);
        }
    }
    Some(if boilerplate {
        BOILERPLATE
    } else if layout {
        LAYOUT
    } else {
        pos as i32 * CONTENT
    })
}

/// The tag part of [`container_weight`]; `None` for elements that are not containers.
fn container_tag_weight(name: &str) -> Option<i32> {
    match name {
        "article" | "main" => Some(CONTENT),
        "dialog" => Some(BOILERPLATE),
        "nav" | "aside" | "footer" | "form" => Some(LAYOUT),
        "div" | "section" | "header" | "ul" | "ol" | "table" | "figure" | "span" | "td" => Some(0),
        _ => None,
    }
}

/// Open containers with their weights; bounded so hostile nesting cannot grow it.
#[derive(Default)]
struct Containers {
    stack: Vec<String>,
    /// Containers opened beyond the bound (not tracked).
    overflow: u32,
}

const MAX_CONTAINERS: usize = 256;

impl Containers {
    fn open(&mut self, name: &str, weight: i32, b: &mut Builder) {
        if self.stack.len() >= MAX_CONTAINERS {
            self.overflow += 1;
            return;
        }
        self.stack.push(name.to_string());
        b.enter(weight);
    }

    /// Closes the innermost open container of this name (and any left open inside it);
    /// an end tag with no open container of its name is ignored.
    fn close(&mut self, name: &str, b: &mut Builder) {
        if self.overflow > 0 {
            self.overflow -= 1;
            return;
        }
        if let Some(pos) = self.stack.iter().rposition(|n| n == name) {
            for _ in self.stack.drain(pos..) {
                b.leave();
            }
        }
    }
}

/// How an element affects text extraction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Content is never visible (`script`, `style`, `svg`, …).
    Hidden,
    /// Starts and ends a block of the given kind.
    Block(BlockKind),
    /// A line break: ends the current block.
    Break,
    /// A link: its text counts as link text.
    Link,
    /// The document head: hidden except the title.
    Head,
    /// Inline or unknown element.
    Inline,
}

fn role(name: &str) -> Role {
    match name {
        // Only elements that are always closed (or raw text) hide their content: a void
        // or often-unclosed element (embed, object, button) must not hide the rest of a page.
        "script" | "style" | "noscript" | "template" | "svg" | "math" | "iframe" | "noembed"
        | "noframes" | "select" | "textarea" => Role::Hidden,
        "head" => Role::Head,
        "title" => Role::Block(BlockKind::Title),
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => Role::Block(BlockKind::Heading),
        "p" => Role::Block(BlockKind::Paragraph),
        "li" | "dt" | "dd" => Role::Block(BlockKind::ListItem),
        "td" | "th" | "caption" => Role::Block(BlockKind::Cell),
        "div" | "section" | "article" | "main" | "header" | "footer" | "nav" | "aside" | "ul"
        | "ol" | "dl" | "table" | "thead" | "tbody" | "tfoot" | "tr" | "blockquote" | "pre"
        | "figure" | "figcaption" | "form" | "fieldset" | "legend" | "address" | "details"
        | "summary" | "body" | "html" | "center" | "option" | "label" | "menu" | "hgroup"
        | "dialog" | "frameset" | "frame" | "xmp" => Role::Block(BlockKind::Text),
        "br" | "hr" | "img" | "input" | "wbr" => Role::Break,
        "a" => Role::Link,
        _ => Role::Inline,
    }
}

/// Accumulates folded text into blocks.
#[derive(Default)]
struct Builder {
    out: Stripped,
    kind: Option<BlockKind>,
    start: usize,
    link_bytes: u32,
    words: u32,
    link_words: u32,
    tags: u32,
    /// Open containers: the first block that can start inside each, and its hint.
    open: Vec<(u32, i32)>,
    /// Closed containers with a hint: first block, end block (exclusive), hint.
    hinted: Vec<(u32, u32, i32)>,
    pending_space: bool,
}

impl Builder {
    /// Blocks ended so far, plus the current one if it has text.
    fn blocks_begun(&self) -> u32 {
        (self.out.blocks.len() + (self.out.text.len() > self.start) as usize) as u32
    }

    /// A container with hint `weight` opens.
    fn enter(&mut self, weight: i32) {
        self.open.push((self.blocks_begun(), weight));
    }

    /// The innermost open container closes.
    fn leave(&mut self) {
        if let Some((first, weight)) = self.open.pop() {
            let end = self.blocks_begun();
            if weight != 0 && end > first {
                self.hinted.push((first, end, weight));
            }
        }
    }

    /// Sets each block's [`Block::context`] from the hinted containers around it: −1 inside
    /// a negative container that holds at most [`MAX_BOILERPLATE_SHARE`] of the page's
    /// words, else +1 inside a positive container, else 0. A negative container around most
    /// of the page is a layout wrapper (a page-wide `<form>`, an unclosed `<aside>`, a
    /// "layout-sidebar" column holding the article), not boilerplate.
    fn assign_contexts(&mut self) {
        while !self.open.is_empty() {
            self.leave();
        }
        let blocks = &mut self.out.blocks;
        let n = blocks.len();
        let mut prefix = Vec::with_capacity(n + 1);
        prefix.push(0u64);
        for b in blocks.iter() {
            prefix.push(prefix[prefix.len() - 1] + b.words as u64);
        }
        let total = prefix[n] as f64;
        let (mut neg, mut pos) = (vec![0i32; n + 1], vec![0i32; n + 1]);
        for &(first, end, weight) in &self.hinted {
            let (f, e) = ((first as usize).min(n), (end as usize).min(n));
            let diff = if weight > 0 {
                &mut pos
            } else if weight <= BOILERPLATE
                || ((prefix[e] - prefix[f]) as f64) <= MAX_BOILERPLATE_SHARE * total
            {
                &mut neg
            } else {
                continue;
            };
            diff[f] += 1;
            diff[e] -= 1;
        }
        let (mut in_neg, mut in_pos) = (0, 0);
        for (i, b) in blocks.iter_mut().enumerate() {
            in_neg += neg[i];
            in_pos += pos[i];
            b.context = if in_neg > 0 { -1 } else { (in_pos > 0) as i32 };
        }
    }

    fn text(&mut self, s: &str, in_link: bool) {
        for c in s.chars() {
            if c.is_whitespace() || c == '\0' {
                self.pending_space = true;
                continue;
            }
            let t = &mut self.out.text;
            if t.len() == self.start || self.pending_space {
                self.words += 1;
                self.link_words += in_link as u32;
            }
            if t.len() > self.start && self.pending_space {
                t.push(' ');
                if in_link {
                    self.link_bytes += 1;
                }
            }
            self.pending_space = false;
            t.push(c);
            if in_link {
                self.link_bytes += c.len_utf8() as u32;
            }
        }
    }

    /// Ends the current block (if it has text) and starts one of `kind`.
    fn boundary(&mut self, kind: BlockKind) {
        self.end_block();
        self.kind = Some(kind);
    }

    fn end_block(&mut self) {
        let t = &mut self.out.text;
        if t.len() > self.start {
            self.out.blocks.push(Block {
                kind: self.kind.unwrap_or(BlockKind::Text),
                start: self.start as u32,
                end: t.len() as u32,
                link_bytes: self.link_bytes,
                words: self.words,
                link_words: self.link_words,
                tags: self.tags,
                context: 0,
            });
            self.tags = 0;
            t.push('\n');
            self.start = t.len();
        }
        self.link_bytes = 0;
        self.words = 0;
        self.link_words = 0;
        self.pending_space = false;
        self.kind = None;
    }

    fn finish(mut self) -> Stripped {
        self.end_block();
        self.assign_contexts();
        if self.out.text.ends_with('\n') {
            self.out.text.pop();
        }
        self.out
    }
}

// ---------------------------------------------------------------------------------------
// Tokenizer path
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct SinkState {
    b: Builder,
    /// Inside a raw-text element whose content is hidden (script, style, …): its name.
    raw_hidden: Option<&'static str>,
    /// The outermost hidden element whose content is tokenized normally (svg, template, …)
    /// and how deeply elements of that name are nested in it.
    hidden: Option<(String, u32)>,
    in_head: bool,
    link_depth: u32,
    containers: Containers,
}

struct Sink(RefCell<SinkState>);

/// Elements whose content the tokenizer must read as raw text; hidden ones are skipped.
fn raw_kind(name: &str) -> Option<(RawKind, &'static str, bool)> {
    Some(match name {
        "script" => (RawKind::ScriptData, "script", true),
        "style" => (RawKind::Rawtext, "style", true),
        "noscript" => (RawKind::Rawtext, "noscript", true),
        "iframe" => (RawKind::Rawtext, "iframe", true),
        "noembed" => (RawKind::Rawtext, "noembed", true),
        "noframes" => (RawKind::Rawtext, "noframes", true),
        "xmp" => (RawKind::Rawtext, "xmp", false),
        "textarea" => (RawKind::Rcdata, "textarea", true),
        "title" => (RawKind::Rcdata, "title", false),
        _ => return None,
    })
}

impl SinkState {
    fn tag(&mut self, tag: &Tag) -> TokenSinkResult<()> {
        self.b.tags += 1;
        let name: &str = &tag.name;
        if let Some(raw) = self.raw_hidden {
            if tag.kind == TagKind::EndTag && name == raw {
                self.raw_hidden = None;
            }
            return TokenSinkResult::Continue;
        }
        let r = role(name);
        match tag.kind {
            TagKind::StartTag => {
                if r == Role::Head {
                    self.in_head = true;
                    return TokenSinkResult::Continue;
                }
                if name == "body" || (self.in_head && !is_head_element(name)) {
                    self.in_head = false;
                }
                if let Some((kind, static_name, hidden)) = raw_kind(name) {
                    if tag.self_closing {
                        return TokenSinkResult::Continue;
                    }
                    if hidden || self.hidden.is_some() {
                        self.raw_hidden = Some(static_name);
                    } else if name == "title" {
                        // the title is visible even inside <head>
                        self.b.boundary(BlockKind::Title);
                    } else {
                        self.b.boundary(BlockKind::Text);
                    }
                    return TokenSinkResult::RawData(kind);
                }
                if let Some((outer, depth)) = &mut self.hidden {
                    if outer == name && !tag.self_closing {
                        *depth += 1;
                    }
                    return TokenSinkResult::Continue;
                }
                if !tag.self_closing {
                    let attrs = tag.attrs.iter().map(|a| (&*a.name.local, &*a.value));
                    if let Some(w) = container_weight(name, attrs) {
                        self.containers.open(name, w, &mut self.b);
                    }
                }
                match r {
                    Role::Hidden if !tag.self_closing => self.hidden = Some((name.to_string(), 1)),
                    Role::Block(kind) => self.b.boundary(kind),
                    Role::Break => self.b.boundary(BlockKind::Text),
                    Role::Link if !tag.self_closing => self.link_depth += 1,
                    _ => {}
                }
                if name == "plaintext" {
                    return TokenSinkResult::Plaintext;
                }
            }
            TagKind::EndTag => {
                if r == Role::Head {
                    self.in_head = false;
                    return TokenSinkResult::Continue;
                }
                if let Some((outer, depth)) = &mut self.hidden {
                    if outer == name {
                        *depth -= 1;
                        if *depth == 0 {
                            self.hidden = None;
                        }
                    }
                    return TokenSinkResult::Continue;
                }
                match r {
                    Role::Block(_) | Role::Break => self.b.end_block(),
                    Role::Link => self.link_depth = self.link_depth.saturating_sub(1),
                    _ => {}
                }
                if container_tag_weight(name).is_some() {
                    self.containers.close(name, &mut self.b);
                }
            }
        }
        TokenSinkResult::Continue
    }
}

fn is_head_element(name: &str) -> bool {
    matches!(
        name,
        "meta" | "link" | "script" | "style" | "title" | "base" | "noscript" | "template"
    )
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut s = self.0.borrow_mut();
        match token {
            Token::TagToken(tag) => s.tag(&tag),
            Token::CharacterTokens(text) => {
                let visible = s.raw_hidden.is_none()
                    && s.hidden.is_none()
                    && (!s.in_head || s.b.kind == Some(BlockKind::Title));
                if visible {
                    let in_link = s.link_depth > 0;
                    s.b.text(&text, in_link);
                }
                TokenSinkResult::Continue
            }
            _ => TokenSinkResult::Continue,
        }
    }
}

fn strip_tokens(html: &str) -> Stripped {
    let sink = Sink(RefCell::new(SinkState::default()));
    let tok = HtmlTokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(html));
    // The sink never asks to pause for a script, so one feed consumes the whole input.
    let _ = tok.feed(&queue);
    tok.end();
    let state = tok.sink.0.into_inner();
    state.b.finish()
}

// ---------------------------------------------------------------------------------------
// Tree path
// ---------------------------------------------------------------------------------------

fn strip_tree(html: &str) -> Stripped {
    use ego_tree::iter::Edge;
    use scraper::Node;

    // The tree builder moves stray text out of <head>, so inside <head> only <title> can
    // hold visible text; <head> itself needs no hiding here.
    let doc = scraper::Html::parse_document(html);
    let mut b = Builder::default();
    let mut hidden_depth = 0u32;
    let mut link_depth = 0u32;
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(el) => {
                    b.tags += 1;
                    // the tree pairs every open with a close
                    b.enter(container_weight(el.name(), el.attrs()).unwrap_or(0));
                    let r = role(el.name());
                    if hidden_depth > 0 || r == Role::Hidden {
                        hidden_depth += 1;
                        continue;
                    }
                    match r {
                        Role::Block(kind) => b.boundary(kind),
                        Role::Break => b.boundary(BlockKind::Text),
                        Role::Link => link_depth += 1,
                        _ => {}
                    }
                }
                Node::Text(t) if hidden_depth == 0 => b.text(t, link_depth > 0),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(el) = node.value() {
                    b.tags += 1;
                    b.leave();
                    if hidden_depth > 0 {
                        hidden_depth -= 1;
                        continue;
                    }
                    match role(el.name()) {
                        Role::Block(_) | Role::Break => b.end_block(),
                        Role::Link => link_depth = link_depth.saturating_sub(1),
                        _ => {}
                    }
                }
            }
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlong_tags_are_cut_and_the_text_after_them_kept() {
        let normal = "<p class=a>x < y and <b>bold</b></p>";
        assert!(matches!(tame_tags(normal), std::borrow::Cow::Borrowed(_)));
        let attrs: String = (0..100_000).map(|i| format!(" a{i}=v")).collect();
        let page = format!("<p>before</p><div{attrs}>after é</div><span{attrs}");
        let tamed = tame_tags(&page);
        assert!(tamed.len() < 2 * MAX_TAG_BYTES + 100, "{}", tamed.len());
        assert!(tamed.contains(">after é</div>"));
        let text = strip(&page, &StripOptions::default()).text;
        assert!(text.contains("before") && text.contains("after"), "{text}");
        // a '<' that opens no tag is text, however far the next '>'
        let plain = format!("a < b {}", "word ".repeat(30_000));
        assert!(matches!(tame_tags(&plain), std::borrow::Cow::Borrowed(_)));
    }

    fn strip_in(html: &str, mode: StripMode) -> Stripped {
        strip(
            html,
            &StripOptions {
                mode,
                ..Default::default()
            },
        )
    }

    fn texts(html: &str, mode: StripMode) -> Vec<(BlockKind, String)> {
        let s = strip_in(html, mode);
        s.iter().map(|(b, t)| (b.kind, t.to_string())).collect()
    }

    const PAGE: &str = r#"<!DOCTYPE html><html><head><title>A  title &amp; more</title>
<style>p { color: red } .the { }</style><script>var the_x = "is the </div> best";</script>
<meta charset="utf-8"></head><body><nav><a href="/">Home</a> <a href="/n">News</a></nav>
<h1>The   headline</h1><p>First&nbsp;paragraph with <b>bold</b> text.<br>Second line.</p>
<ul><li>one item</li><li>two</li></ul><table><tr><td>cell a</td><td>cell b</td></tr></table>
<noscript>enable the scripts</noscript><svg><title>icon</title><text>svg text</text></svg>
<template><p>hidden template</p></template><iframe>frame text</iframe>
<!-- a comment --><p>caf&eacute; &mdash; done</p></body></html>"#;

    #[test]
    fn blocks_and_hidden_content() {
        for mode in [StripMode::Tokens, StripMode::Tree] {
            let t = texts(PAGE, mode);
            let expect = vec![
                (BlockKind::Title, "A title & more".to_string()),
                (BlockKind::Text, "Home News".to_string()),
                (BlockKind::Heading, "The headline".to_string()),
                (
                    BlockKind::Paragraph,
                    "First paragraph with bold text.".to_string(),
                ),
                (BlockKind::Text, "Second line.".to_string()),
                (BlockKind::ListItem, "one item".to_string()),
                (BlockKind::ListItem, "two".to_string()),
                (BlockKind::Cell, "cell a".to_string()),
                (BlockKind::Cell, "cell b".to_string()),
                (BlockKind::Paragraph, "café — done".to_string()),
            ];
            assert_eq!(t, expect, "mode {mode:?}");
        }
    }

    #[test]
    fn main_region_is_the_dense_text() {
        let nav: String = (0..30)
            .map(|i| format!("<li><a href=/{i}>Section {i}</a></li>"))
            .collect();
        let article =
            "<p>".to_string() + &"the council voted to build the barrier ".repeat(20) + "</p>";
        let html = format!(
            "<ul>{nav}</ul><div><h1>Headline words here</h1>{article}{article}</div><ul>{nav}</ul>\
             <p>Copyright</p>"
        );
        for mode in [StripMode::Tokens, StripMode::Tree] {
            let s = strip_in(&html, mode);
            let r = main_region(&s.blocks);
            let kept: Vec<&str> = s.blocks[r].iter().map(|b| s.block_text(b)).collect();
            let article: Vec<&&str> = kept
                .iter()
                .filter(|t| t.starts_with("the council"))
                .collect();
            assert_eq!(article.len(), 2, "{mode:?}: {kept:?}");
            assert!(
                kept.iter()
                    .all(|t| !t.starts_with("Section") && *t != "Copyright"),
                "{kept:?}"
            );
            assert_eq!(s.blocks[1].words, 2);
            assert_eq!(s.blocks[1].link_words, 2);
        }
        assert_eq!(main_region(&[]), 0..0);
    }

    #[test]
    fn container_hints_mark_boilerplate() {
        let long = "the notice says that the site is committed to the access of all ".repeat(8);
        let html = format!(
            "<div class=\"post-content\"><p>the short article is about the river and the \
             barrier that the town built</p></div><div class=\"site-popup\"><div \
             class=\"widget-text\"><p>{long}</p></div></div><form><p>{long}</p></form>"
        );
        for mode in [StripMode::Tokens, StripMode::Tree] {
            let s = strip_in(&html, mode);
            let ctx: Vec<i32> = s.blocks.iter().map(|b| b.context).collect();
            // a positive container inside a popup does not rescue it
            assert_eq!(ctx, [1, -1, -1], "{mode:?}");
            let r = main_region(&s.blocks);
            assert_eq!(r, 0..1, "{mode:?}");
        }
        let w = |class: &str| container_weight("div", [("class", class)].into_iter());
        assert_eq!(w("comments-area"), Some(BOILERPLATE));
        // a negative word wins over a positive one on the same element
        assert_eq!(w("comments-body"), Some(BOILERPLATE));
        assert_eq!(
            w("commenting-guidelines editorial-content"),
            Some(BOILERPLATE)
        );
        assert_eq!(w("layout-sidebar-right"), Some(LAYOUT));
        // whole words only
        assert_eq!(w("node node--promoted"), Some(0));
        assert_eq!(
            container_weight("div", [("id", "post-body")].into_iter()),
            Some(CONTENT)
        );
        assert_eq!(w("head read"), Some(0));
        assert_eq!(container_weight("form", std::iter::empty()), Some(LAYOUT));
        assert_eq!(
            container_weight("dialog", std::iter::empty()),
            Some(BOILERPLATE)
        );
        assert_eq!(container_weight("b", std::iter::empty()), None);
    }

    #[test]
    fn layout_wrappers_around_most_of_the_page_are_not_boilerplate() {
        let article = "<p>the council said that the new bridge would open in the spring and \
                       that the old one was to be closed</p>"
            .repeat(6);
        let notice = "<p>the site is committed to the access of all of its readers</p>";
        // a page-wide <form>, an unclosed <aside> and a sidebar-layout column hold the
        // article: they are layout, not boilerplate; a small layout block still is
        for wrapper in [
            format!("<form id=\"page\">{article}</form><nav>{notice}</nav>"),
            format!("<aside class=\"announcement-banner\"><a href=\"/\">news</a><main>{article}</main><nav>{notice}</nav>"),
            format!("<div class=\"layout-sidebar-right\">{article}</div><div class=\"footer\">{notice}</div>"),
        ] {
            for mode in [StripMode::Tokens, StripMode::Tree] {
                let s = strip_in(&wrapper, mode);
                let article_blocks = s
                    .iter()
                    .filter(|(_, t)| t.starts_with("the council"))
                    .map(|(b, _)| b.context)
                    .collect::<Vec<_>>();
                assert_eq!(article_blocks.len(), 6, "{mode:?} {wrapper}");
                assert!(article_blocks.iter().all(|&c| c >= 0), "{mode:?} {wrapper}");
                let notice_ctx = s
                    .iter()
                    .find(|(_, t)| t.starts_with("the site"))
                    .map(|(b, _)| b.context);
                assert_eq!(notice_ctx, Some(-1), "{mode:?} {wrapper}");
                let r = main_region(&s.blocks);
                assert!(
                    s.blocks[r].iter().all(|b| b.context >= 0),
                    "{mode:?} {wrapper}"
                );
            }
        }
    }

    #[test]
    fn link_bytes_counted() {
        let s = strip(PAGE, &StripOptions::default());
        let nav = s.blocks[1];
        assert_eq!(s.block_text(&nav), "Home News");
        assert_eq!(
            nav.link_bytes, 9,
            "the space before a link counts with the link"
        );
        assert_eq!(s.blocks[2].link_bytes, 0);
    }

    #[test]
    fn junk_and_limits_never_panic() {
        let deep = "<div>".repeat(10_000) + "deep text" + &"</div>".repeat(10_000);
        let formatting = "<b><i><u>".repeat(3_000) + "x";
        let inputs: Vec<String> = vec![
            String::new(),
            "just plain text, no markup at all.".into(),
            "\u{0}\u{1}\u{fffd}<<<>>>&&&;;</".into(),
            "<p>unterminated <!-- comment".into(),
            "<script>never closed".into(),
            deep.clone(),
            formatting,
            "<".repeat(10_000),
            "<svg><svg></svg></svg></svg></svg>".repeat(1000),
        ];
        for mode in [StripMode::Tokens, StripMode::Tree] {
            for input in &inputs {
                let _ = strip(
                    input,
                    &StripOptions {
                        mode,
                        max_bytes: 1 << 20,
                    },
                );
            }
            let s = strip(
                &deep,
                &StripOptions {
                    mode,
                    max_bytes: 1 << 20,
                },
            );
            assert_eq!(s.text, "deep text");
            let p = strip(
                "plain words here",
                &StripOptions {
                    mode,
                    max_bytes: 1 << 20,
                },
            );
            assert_eq!(p.text, "plain words here");
        }
    }

    #[test]
    fn void_and_stray_tags_hide_nothing_after_them() {
        let html = "<object><embed src=x></embed><embed src=y></object><button>Go\
            <p>first words</p></svg></template><svg><g><svg></svg></g></svg><p>after svg</p>";
        for mode in [StripMode::Tokens, StripMode::Tree] {
            let s = strip_in(html, mode);
            assert!(s.text.contains("first words"), "{mode:?}: {:?}", s.text);
            assert!(s.text.ends_with("after svg"), "{mode:?}: {:?}", s.text);
        }
    }

    #[test]
    fn size_limit_cuts_on_char_boundary() {
        let html = "<p>é".to_string() + &"é".repeat(100) + "</p>";
        let s = strip(
            &html,
            &StripOptions {
                mode: StripMode::Tokens,
                max_bytes: 10,
            },
        );
        assert!(s.truncated);
        assert!(s.text.chars().all(|c| c == 'é'));
        assert_eq!(s.text.chars().count(), 3);
    }
}

//! The block rules: what each start tag, end tag and run of text does to the blocks, given
//! as events by a tokenizer (the byte scanner, or html5ever's tokenizer in the reference
//! path). A start tag also tells the tokenizer how to read what follows (raw text for
//! `script`, `style`, `title`, …), so both tokenizers split the input the same way.

use super::builder::Builder;
use super::hints::{container_tag_weight, container_weight};
use super::{BlockKind, Stripped};

/// How an element affects text extraction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
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

pub(super) fn role(name: &str) -> Role {
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

/// How the tokenizer reads the content of an element (the HTML tokenizer's states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Raw {
    /// Script data: raw text with the script escape rules (`<!--` … `-->`).
    Script,
    /// Raw text: no tags, no character references.
    Rawtext,
    /// Escapable raw text: no tags, character references decoded.
    Rcdata,
}

/// What the tokenizer does after a start tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Go on tokenizing markup.
    Data,
    /// Read raw text up to the element's end tag.
    Raw(Raw),
    /// Everything after is text (`<plaintext>`).
    Plaintext,
}

/// Elements whose content the tokenizer must read as raw text; hidden ones are skipped.
fn raw_kind(name: &str) -> Option<(Raw, &'static str, bool)> {
    Some(match name {
        "script" => (Raw::Script, "script", true),
        "style" => (Raw::Rawtext, "style", true),
        "noscript" => (Raw::Rawtext, "noscript", true),
        "iframe" => (Raw::Rawtext, "iframe", true),
        "noembed" => (Raw::Rawtext, "noembed", true),
        "noframes" => (Raw::Rawtext, "noframes", true),
        "xmp" => (Raw::Rawtext, "xmp", false),
        "textarea" => (Raw::Rcdata, "textarea", true),
        "title" => (Raw::Rcdata, "title", false),
        _ => return None,
    })
}

/// The names of hidden elements whose content is tokenized (not raw text).
fn hidden_name(name: &str) -> &'static str {
    match name {
        "template" => "template",
        "svg" => "svg",
        "math" => "math",
        "select" => "select",
        // raw-text elements never get here; any other name is not hidden
        _ => "",
    }
}

fn is_head_element(name: &str) -> bool {
    matches!(
        name,
        "meta" | "link" | "script" | "style" | "title" | "base" | "noscript" | "template"
    )
}

/// Open containers; bounded so hostile nesting cannot grow it.
#[derive(Default)]
struct Containers {
    stack: Vec<&'static str>,
    /// Containers opened beyond the bound (not tracked).
    overflow: u32,
}

const MAX_CONTAINERS: usize = 256;

/// The container names of [`container_tag_weight`].
fn container_name(name: &str) -> &'static str {
    match name {
        "article" => "article",
        "main" => "main",
        "dialog" => "dialog",
        "nav" => "nav",
        "aside" => "aside",
        "footer" => "footer",
        "form" => "form",
        "div" => "div",
        "section" => "section",
        "header" => "header",
        "ul" => "ul",
        "ol" => "ol",
        "table" => "table",
        "figure" => "figure",
        "span" => "span",
        "td" => "td",
        _ => "",
    }
}

impl Containers {
    fn open(&mut self, name: &str, weight: i32, b: &mut Builder) {
        if self.stack.len() >= MAX_CONTAINERS {
            self.overflow += 1;
            return;
        }
        self.stack.push(container_name(name));
        b.enter(weight);
    }

    /// Closes the innermost open container of this name (and any left open inside it);
    /// an end tag with no open container of its name is ignored.
    fn close(&mut self, name: &str, b: &mut Builder) {
        if self.overflow > 0 {
            self.overflow -= 1;
            return;
        }
        if let Some(pos) = self.stack.iter().rposition(|n| *n == name) {
            for _ in self.stack.drain(pos..) {
                b.leave();
            }
        }
    }
}

/// The state of the rules between events.
#[derive(Default)]
pub(super) struct Rules {
    b: Builder,
    /// Inside a raw-text element whose content is hidden (script, style, …): its name.
    raw_hidden: Option<&'static str>,
    /// The outermost hidden element whose content is tokenized normally (svg, template, …)
    /// and how deeply elements of that name are nested in it.
    hidden: Option<(&'static str, u32)>,
    in_head: bool,
    link_depth: u32,
    containers: Containers,
}

impl Rules {
    /// A start tag; `attrs` are its attributes (name, value), read only for containers.
    pub(super) fn start_tag<'a>(
        &mut self,
        name: &str,
        self_closing: bool,
        attrs: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Next {
        self.b.tags += 1;
        if self.raw_hidden.is_some() {
            return Next::Data;
        }
        let r = role(name);
        if r == Role::Head {
            self.in_head = true;
            return Next::Data;
        }
        if name == "body" || (self.in_head && !is_head_element(name)) {
            self.in_head = false;
        }
        if let Some((kind, static_name, hidden)) = raw_kind(name) {
            if self_closing {
                return Next::Data;
            }
            if hidden || self.hidden.is_some() {
                self.raw_hidden = Some(static_name);
            } else if name == "title" {
                // the title is visible even inside <head>
                self.b.boundary(BlockKind::Title);
            } else {
                self.b.boundary(BlockKind::Text);
            }
            return Next::Raw(kind);
        }
        if let Some((outer, depth)) = &mut self.hidden {
            if *outer == name && !self_closing {
                *depth += 1;
            }
            return Next::Data;
        }
        if !self_closing && container_tag_weight(name).is_some() {
            if let Some(w) = container_weight(name, attrs) {
                self.containers.open(name, w, &mut self.b);
            }
        }
        match r {
            Role::Hidden if !self_closing => self.hidden = Some((hidden_name(name), 1)),
            Role::Block(kind) => self.b.boundary(kind),
            Role::Break => self.b.boundary(BlockKind::Text),
            Role::Link if !self_closing => self.link_depth += 1,
            _ => {}
        }
        if name == "plaintext" {
            return Next::Plaintext;
        }
        Next::Data
    }

    /// An end tag.
    pub(super) fn end_tag(&mut self, name: &str) {
        self.b.tags += 1;
        if let Some(raw) = self.raw_hidden {
            if name == raw {
                self.raw_hidden = None;
            }
            return;
        }
        let r = role(name);
        if r == Role::Head {
            self.in_head = false;
            return;
        }
        if let Some((outer, depth)) = &mut self.hidden {
            if *outer == name {
                *depth -= 1;
                if *depth == 0 {
                    self.hidden = None;
                }
            }
            return;
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

    /// Whether text here is visible: `None` when hidden, else whether it is link text.
    #[inline]
    pub(super) fn visible(&self) -> Option<bool> {
        let visible = self.raw_hidden.is_none()
            && self.hidden.is_none()
            && (!self.in_head || self.b.kind == Some(BlockKind::Title));
        visible.then_some(self.link_depth > 0)
    }

    /// Text (character data, entities decoded); dropped where hidden.
    #[inline]
    pub(super) fn text(&mut self, s: &str) {
        if let Some(in_link) = self.visible() {
            self.b.text(s, in_link);
        }
    }

    /// The stripped page.
    pub(super) fn finish(self) -> Stripped {
        self.b.finish()
    }
}

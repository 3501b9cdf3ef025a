//! The block rules: what each start tag, end tag and run of text does to the blocks, given
//! as events by a tokenizer (the byte scanner, or html5ever's tokenizer in the reference
//! path). A start tag also tells the tokenizer how to read what follows (raw text for
//! `script`, `style`, `title`, …), so both tokenizers split the input the same way.

use super::builder::Builder;
use super::hints::{container_tag_weight, weight_with, HintAttrs, HintRules};
use super::options::StripOptions;
use super::output::{BlockKind, Stripped};

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
    tag_info(name).role
}

/// Everything the rules know of an element, from one lookup of its name.
#[derive(Clone, Copy)]
pub(super) struct Info {
    pub(super) role: Role,
    /// Its hint as a container by tag ([`container_tag_weight`]); `None`: no container.
    pub(super) container: Option<i32>,
    /// Read as raw text: how, and whether its text is hidden.
    raw: Option<(Raw, bool)>,
    /// May stand in `<head>` (`meta`, `link`, …): does not end the head.
    head_element: bool,
    /// The name, for elements whose end tags are matched (containers, hidden elements).
    name: &'static str,
}

/// One lookup for [`Info`].
pub(super) fn tag_info(name: &str) -> Info {
    use BlockKind::*;
    let block = |kind| Role::Block(kind);
    let (role, raw, head_element, name): (Role, Option<(Raw, bool)>, bool, &'static str) =
        match name {
            // Only elements that are always closed (or raw text) hide their content: a void
            // or often-unclosed element (embed, object, button) must not hide the rest of
            // a page.
            "script" => (Role::Hidden, Some((Raw::Script, true)), true, "script"),
            "style" => (Role::Hidden, Some((Raw::Rawtext, true)), true, "style"),
            "noscript" => (Role::Hidden, Some((Raw::Rawtext, true)), true, "noscript"),
            "iframe" => (Role::Hidden, Some((Raw::Rawtext, true)), false, "iframe"),
            "noembed" => (Role::Hidden, Some((Raw::Rawtext, true)), false, "noembed"),
            "noframes" => (Role::Hidden, Some((Raw::Rawtext, true)), false, "noframes"),
            "textarea" => (Role::Hidden, Some((Raw::Rcdata, true)), false, "textarea"),
            "template" => (Role::Hidden, None, true, "template"),
            "svg" => (Role::Hidden, None, false, "svg"),
            "math" => (Role::Hidden, None, false, "math"),
            "select" => (Role::Hidden, None, false, "select"),
            "head" => (Role::Head, None, false, ""),
            "title" => (block(Title), Some((Raw::Rcdata, false)), true, "title"),
            "xmp" => (block(Text), Some((Raw::Rawtext, false)), false, "xmp"),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => (block(Heading), None, false, ""),
            "p" => (block(Paragraph), None, false, ""),
            "li" | "dt" | "dd" => (block(ListItem), None, false, ""),
            "td" => (block(Cell), None, false, "td"),
            "th" | "caption" => (block(Cell), None, false, ""),
            "div" => (block(Text), None, false, "div"),
            "section" => (block(Text), None, false, "section"),
            "article" => (block(Text), None, false, "article"),
            "main" => (block(Text), None, false, "main"),
            "header" => (block(Text), None, false, "header"),
            "footer" => (block(Text), None, false, "footer"),
            "nav" => (block(Text), None, false, "nav"),
            "aside" => (block(Text), None, false, "aside"),
            "ul" => (block(Text), None, false, "ul"),
            "ol" => (block(Text), None, false, "ol"),
            "table" => (block(Text), None, false, "table"),
            "figure" => (block(Text), None, false, "figure"),
            "form" => (block(Text), None, false, "form"),
            "dialog" => (block(Text), None, false, "dialog"),
            "dl" | "thead" | "tbody" | "tfoot" | "tr" | "blockquote" | "pre" | "figcaption"
            | "fieldset" | "legend" | "address" | "details" | "summary" | "body" | "html"
            | "center" | "option" | "label" | "menu" | "hgroup" | "frameset" | "frame" => {
                (block(Text), None, false, "")
            }
            "br" | "hr" | "img" | "input" | "wbr" => (Role::Break, None, false, ""),
            "a" => (Role::Link, None, false, ""),
            "span" => (Role::Inline, None, false, "span"),
            "meta" | "link" | "base" => (Role::Inline, None, true, ""),
            _ => (Role::Inline, None, false, ""),
        };
    Info {
        role,
        container: if name.is_empty() {
            None
        } else {
            container_tag_weight(name)
        },
        raw,
        head_element,
        name,
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

/// Open containers; bounded so hostile nesting cannot grow it.
#[derive(Default)]
struct Containers {
    stack: Vec<&'static str>,
    /// Containers opened beyond the bound (not tracked).
    overflow: u32,
}

const MAX_CONTAINERS: usize = 256;

impl Containers {
    fn open(&mut self, name: &'static str, weight: i32, b: &mut Builder) {
        if self.stack.len() >= MAX_CONTAINERS {
            self.overflow += 1;
            return;
        }
        self.stack.push(name);
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
    links: Links,
    containers: Containers,
    /// The hints that count ([`StripOptions::hint_rules`]).
    hint_rules: HintRules,
}

/// Whether text is link text, as the HTML tree-building rules place `<a>` elements: links
/// do not nest (an `<a>` inside an open one ends it first), and a table cell is a scope
/// (a marker in the list of active formatting elements): a cell starts with the link
/// state of its table's context, a link opened in a cell and never closed ends with the
/// cell instead of running over the rest of the page, and a link around the table still
/// holds the cell's text after a link of the cell ends. Pages that leave their links open
/// in table cells (a "most viewed" box of a 2000s CMS) otherwise count their whole article
/// as link text. Without scopes ([`StripOptions::link_scopes`] off, text rules 1) every `<a>`
/// nests and lasts to its end tag.
#[derive(Default)]
struct Links {
    scopes: bool,
    /// With scopes: a link opened in the current cell (or outside any table).
    here: bool,
    /// Without scopes: open `<a>` elements.
    depth: u32,
    /// For each open table (bounded), whether its context is link text.
    tables: Vec<bool>,
    /// Tables opened beyond the bound (not tracked).
    overflow: u32,
}

const MAX_TABLES: usize = 64;

impl Links {
    fn open(&self) -> bool {
        if self.scopes {
            self.here || self.tables.last().copied().unwrap_or(false)
        } else {
            self.depth > 0
        }
    }

    fn start(&mut self, name: &str) {
        if !self.scopes {
            if name == "a" {
                self.depth += 1;
            }
            return;
        }
        match name {
            "a" => self.here = true,
            "table" => {
                if self.tables.len() < MAX_TABLES {
                    self.tables.push(self.open());
                    self.here = false;
                } else {
                    self.overflow += 1;
                }
            }
            "td" | "th" | "tr" | "caption" | "thead" | "tbody" | "tfoot" => self.here = false,
            _ => {}
        }
    }

    fn end(&mut self, name: &str) {
        if !self.scopes {
            if name == "a" {
                self.depth = self.depth.saturating_sub(1);
            }
            return;
        }
        match name {
            "a" => self.here = false,
            "table" => {
                if self.overflow > 0 {
                    self.overflow -= 1;
                } else if let Some(outer) = self.tables.pop() {
                    self.here = outer;
                }
            }
            "td" | "th" | "tr" | "caption" | "thead" | "tbody" | "tfoot" => self.here = false,
            _ => {}
        }
    }
}

impl Rules {
    /// Whether a dialog that is not rendered counts ([`HintRules::hidden_dialogs`]).
    pub(super) fn hidden_dialogs(&self) -> bool {
        self.hint_rules.hidden_dialogs
    }

    /// Rules with or without link scopes ([`Links`]), the hints of ARIA roles and those of
    /// hidden dialogs ([`StripOptions`]).
    pub(super) fn new(opts: &StripOptions) -> Rules {
        Rules {
            links: Links {
                scopes: opts.link_scopes,
                ..Links::default()
            },
            hint_rules: opts.hint_rules(),
            ..Rules::default()
        }
    }

    /// A start tag of `name` ([`tag_info`] of it: `info`); `attrs` are its hint
    /// attributes, read only for containers (a tokenizer may leave them out for others).
    pub(super) fn start_tag(
        &mut self,
        name: &str,
        info: Info,
        self_closing: bool,
        attrs: &HintAttrs<'_>,
    ) -> Next {
        self.b.tags += 1;
        if self.raw_hidden.is_some() {
            return Next::Data;
        }
        let r = info.role;
        if r == Role::Head {
            self.in_head = true;
            return Next::Data;
        }
        if name == "body" || (self.in_head && !info.head_element) {
            self.in_head = false;
        }
        if let Some((kind, hidden)) = info.raw {
            if self_closing {
                return Next::Data;
            }
            if hidden || self.hidden.is_some() {
                self.raw_hidden = Some(info.name);
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
        if let (false, Some(tag)) = (self_closing, info.container) {
            self.containers.open(
                info.name,
                weight_with(tag, attrs, self.hint_rules),
                &mut self.b,
            );
        }
        match r {
            Role::Hidden if !self_closing => self.hidden = Some((info.name, 1)),
            Role::Block(kind) => self.b.boundary(kind),
            Role::Break => self.b.boundary(BlockKind::Text),
            _ => {}
        }
        if !self_closing {
            self.links.start(name);
        }
        if name == "plaintext" {
            return Next::Plaintext;
        }
        Next::Data
    }

    /// An end tag of `name` ([`tag_info`] of it: `info`).
    pub(super) fn end_tag(&mut self, name: &str, info: Info) {
        self.b.tags += 1;
        if let Some(raw) = self.raw_hidden {
            if name == raw {
                self.raw_hidden = None;
            }
            return;
        }
        let r = info.role;
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
            _ => {}
        }
        self.links.end(name);
        if info.container.is_some() {
            self.containers.close(name, &mut self.b);
        }
    }

    /// Whether text here is visible: `None` when hidden, else whether it is link text.
    #[inline]
    pub(super) fn visible(&self) -> Option<bool> {
        let visible = self.raw_hidden.is_none()
            && self.hidden.is_none()
            && (!self.in_head || self.b.kind == Some(BlockKind::Title));
        visible.then_some(self.links.open())
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

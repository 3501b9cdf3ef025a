//! Container hints: what an element's tag, its ARIA role, its class and id words and
//! whether it is rendered (`hidden`, an inline `display: none`) say of the text inside it
//! (boilerplate, page layout, content).

/// Hint of a boilerplate container ([`container_weight`]).
pub const BOILERPLATE: i32 = -2;
/// Hint of a layout container ([`container_weight`]).
pub const LAYOUT: i32 = -1;
/// Hint of a content container ([`container_weight`]).
pub const CONTENT: i32 = 1;

/// What one class or id word names (ASCII case-insensitive, whole words only: a prefix
/// rule would read a CMS's `node--promoted` as a promo).
///
/// - boilerplate content (comments, consent notices, popups, ads, share bars, …): a
///   container with one is boilerplate whatever its size;
/// - page layout around the content (footer, sidebar, menu, …): boilerplate too, unless the
///   container holds most of the page (a layout wrapper);
/// - content (article, post body, …).
fn word_hint(word: &[u8]) -> i32 {
    // hint words are 2 to 16 bytes long; other words are no hint
    let mut buf = [0u8; 16];
    let Some(lower) = buf.get_mut(..word.len()) else {
        return 0;
    };
    // most words are no hint: reject them by length and first letter before lowercasing
    const FIRST: [u32; 17] = first_letters();
    if FIRST[word.len()] & (1 << (word[0] | 0x20).wrapping_sub(b'a').min(31)) == 0 {
        return 0;
    }
    lower.copy_from_slice(word);
    lower.make_ascii_lowercase();
    match &*lower {
        b"ad" | b"ads" | b"advert" | b"advertisement" | b"breadcrumb" | b"breadcrumbs"
        | b"comment" | b"commenting" | b"commentlist" | b"comments" | b"consent" | b"cookie"
        | b"cookies" | b"disqus" | b"gdpr" | b"modal" | b"newsletter" | b"pagination"
        | b"popup" | b"promo" | b"recommended" | b"related" | b"share" | b"sharing" | b"signup"
        | b"social" | b"sponsor" | b"sponsored" | b"subscribe" | b"subscription" => BOILERPLATE,
        b"banner" | b"footer" | b"masthead" | b"menu" | b"nav" | b"navbar" | b"navigation"
        | b"pager" | b"sidebar" | b"toolbar" => LAYOUT,
        b"article" | b"articlebody" | b"body" | b"content" | b"entry" | b"hentry" | b"main"
        | b"post" | b"story" | b"text" => CONTENT,
        _ => 0,
    }
}

/// Every hint word (lowercase).
const HINT_WORDS: [&str; 50] = [
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

/// For each word length, the first letters of the hint words of that length, as bits.
const fn first_letters() -> [u32; 17] {
    let mut t = [0u32; 17];
    let mut i = 0;
    while i < HINT_WORDS.len() {
        let w = HINT_WORDS[i].as_bytes();
        t[w.len()] |= 1 << (w[0] - b'a');
        i += 1;
    }
    t
}

/// Content hint of a container element, from its tag (or its explicit ARIA role, which
/// replaces it), and its class and id words (split on non-alphanumerics): [`BOILERPLATE`]
/// for a `dialog`, a dialog role or a boilerplate word (comment, cookie, popup, …), else
/// [`LAYOUT`] for `nav`, `aside`, `footer`, `form`, a landmark role of the page's layout
/// ([`role_weight`]) or a layout word (footer, sidebar, menu, …), else [`CONTENT`] for
/// `article`, `main`, their roles or a content word (article, content, post, …), else 0.
/// Negative hints win over positive ones (`comments-body` is boilerplate). A container
/// named a dialog that is not rendered weighs as layout (boilerplate unless it holds most
/// of the page). Returns `None` for elements that are not containers. Roles and hidden
/// dialogs count as in text rules 4 (the stripper reads them only with
/// [`super::StripOptions::aria_roles`] and [`super::StripOptions::hidden_dialogs`]).
pub fn container_weight<'a>(
    name: &str,
    attrs: impl Iterator<Item = (&'a str, &'a str)>,
) -> Option<i32> {
    Some(weight_with(
        container_tag_weight(name)?,
        &HintAttrs::of(attrs),
        HintRules {
            aria_roles: true,
            hidden_dialogs: true,
        },
    ))
}

/// The attributes a container's hint is read from: the first of each name (the
/// tokenizer drops repeated ones).
#[derive(Clone, Copy, Default)]
pub(super) struct HintAttrs<'a> {
    pub class: Option<&'a str>,
    pub id: Option<&'a str>,
    pub role: Option<&'a str>,
    /// The inline style (read for [`HintRules::hidden_dialogs`]).
    pub style: Option<&'a str>,
    /// The `hidden` attribute is present.
    pub hidden: bool,
}

/// Which hints count beyond tags and class and id words (the text rules' revision).
#[derive(Clone, Copy, Default)]
pub(super) struct HintRules {
    /// [`super::StripOptions::aria_roles`].
    pub aria_roles: bool,
    /// [`super::StripOptions::hidden_dialogs`].
    pub hidden_dialogs: bool,
}

impl<'a> HintAttrs<'a> {
    /// The hint attributes among `attrs` (name, value), names in lowercase.
    pub(super) fn of(attrs: impl Iterator<Item = (&'a str, &'a str)>) -> HintAttrs<'a> {
        let mut h = HintAttrs::default();
        for (k, v) in attrs {
            let slot = match k {
                "class" => &mut h.class,
                "id" => &mut h.id,
                "role" => &mut h.role,
                "style" => &mut h.style,
                "hidden" => {
                    h.hidden = true;
                    continue;
                }
                _ => continue,
            };
            slot.get_or_insert(v);
        }
        h
    }
}

/// [`container_weight`] of a container whose tag weighs `tag`; its role counts only with
/// `aria_roles` ([`super::StripOptions::aria_roles`]), and then replaces the tag's weight.
pub(super) fn weight_with(tag: i32, attrs: &HintAttrs<'_>, rules: HintRules) -> i32 {
    // an explicit role replaces the tag's implicit one
    let tag = attrs
        .role
        .filter(|_| rules.aria_roles)
        .and_then(role_weight)
        .unwrap_or(tag);
    let (mut pos, mut layout, mut boilerplate) = (tag > 0, tag == LAYOUT, tag == BOILERPLATE);
    let mut hint = |w: i32| match w {
        BOILERPLATE => boilerplate = true,
        LAYOUT => layout = true,
        CONTENT => pos = true,
        _ => {}
    };
    let mut dialog = false;
    for v in [attrs.class, attrs.id].into_iter().flatten() {
        for word in v
            .as_bytes()
            .split(|c| !c.is_ascii_alphanumeric())
            .filter(|w| (2..=16).contains(&w.len()))
        {
            hint(word_hint(word));
            dialog |= rules.hidden_dialogs && names_a_dialog(word);
        }
    }
    // a container named a dialog that is not rendered is one a script opens; around most
    // of the page it is a wrapper (shown when the page is ready), which is why it weighs as
    // layout does: boilerplate unless it holds most of the page
    if dialog && !attrs.rendered() {
        layout = true;
    }
    if boilerplate {
        BOILERPLATE
    } else if layout {
        LAYOUT
    } else {
        pos as i32 * CONTENT
    }
}

/// Whether a class or id word is `dialog`, or `dialog` and a number (`dialog2`).
fn names_a_dialog(word: &[u8]) -> bool {
    let digits = word.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    word[..word.len() - digits].eq_ignore_ascii_case(b"dialog")
}

/// Whether a class or id value has a word that names a dialog ([`names_a_dialog`]): the
/// byte scanner decodes the character references of an element's inline style only then.
pub(super) fn value_names_a_dialog(value: &str) -> bool {
    value
        .as_bytes()
        .split(|c| !c.is_ascii_alphanumeric())
        .any(|w| (6..=16).contains(&w.len()) && names_a_dialog(w))
}

impl HintAttrs<'_> {
    /// Whether the element is rendered as far as its own attributes say: an inline
    /// `display` declaration decides ([`inline_display_none`]: an inline style overrides
    /// what `hidden` does), and without one, the `hidden` attribute.
    fn rendered(&self) -> bool {
        match self.style.and_then(inline_display_none) {
            Some(none) => !none,
            None => !self.hidden,
        }
    }
}

/// What an inline style's `display` says: `Some(true)` when the declaration that applies
/// is `none`, `Some(false)` when it is another value, `None` without one. The declaration
/// that applies is the last one, unless an earlier one is `!important` and the later ones
/// are not. Names and values are ASCII case-insensitive, spaces allowed; a property whose
/// name only ends in `display` does not count, nor a `none` followed by a name character,
/// which makes another word: a letter, a digit, `-`, `_`, a non-ASCII character, or NUL,
/// which the HTML tokenizer turns into U+FFFD. Declarations are split at `;`: comments
/// and quoted strings holding one are not read as CSS reads them.
fn inline_display_none(style: &str) -> Option<bool> {
    const SPACE: [char; 5] = [' ', '\t', '\n', '\r', '\u{c}'];
    // (none, important) of the declaration that applies so far
    let mut applies: Option<(bool, bool)> = None;
    for decl in style.split(';') {
        let Some((name, value)) = decl.split_once(':') else {
            continue;
        };
        if !name.trim_matches(SPACE).eq_ignore_ascii_case("display") {
            continue;
        }
        let value = value.trim_matches(SPACE);
        let (value, important) = match value.rfind('!') {
            Some(at)
                if value[at + 1..]
                    .trim_matches(SPACE)
                    .eq_ignore_ascii_case("important") =>
            {
                (value[..at].trim_end_matches(SPACE), true)
            }
            _ => (value, false),
        };
        if value.is_empty() {
            continue; // an invalid declaration (`display:`, `display: !important`), ignored
        }
        let v = value.as_bytes();
        let none = v.len() >= 4
            && v[..4].eq_ignore_ascii_case(b"none")
            && v.get(4).is_none_or(|&c| {
                !(c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | 0) || c >= 0x80)
            });
        if applies.is_none_or(|(_, earlier)| important || !earlier) {
            applies = Some((none, important));
        }
    }
    applies.map(|(none, _)| none)
}

/// The roles of WAI-ARIA (1.2, and `image`, the later name of `img`), of its digital
/// publishing module (`doc-…`) and of its graphics module (`graphics-…`): a `role`
/// attribute's first token that is one of these is the element's role.
const ARIA_ROLES: [&str; 127] = [
    "alert",
    "alertdialog",
    "application",
    "article",
    "banner",
    "blockquote",
    "button",
    "caption",
    "cell",
    "checkbox",
    "code",
    "columnheader",
    "combobox",
    "complementary",
    "contentinfo",
    "definition",
    "deletion",
    "dialog",
    "directory",
    "document",
    "emphasis",
    "feed",
    "figure",
    "form",
    "generic",
    "grid",
    "gridcell",
    "group",
    "heading",
    "img",
    "insertion",
    "link",
    "list",
    "listbox",
    "listitem",
    "log",
    "main",
    "marquee",
    "math",
    "menu",
    "menubar",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "meter",
    "navigation",
    "none",
    "note",
    "option",
    "paragraph",
    "presentation",
    "progressbar",
    "radio",
    "radiogroup",
    "region",
    "row",
    "rowgroup",
    "rowheader",
    "scrollbar",
    "search",
    "searchbox",
    "separator",
    "slider",
    "spinbutton",
    "status",
    "strong",
    "subscript",
    "superscript",
    "switch",
    "tab",
    "table",
    "tablist",
    "tabpanel",
    "term",
    "textbox",
    "time",
    "timer",
    "toolbar",
    "tooltip",
    "tree",
    "treegrid",
    "treeitem",
    "image",
    "doc-abstract",
    "doc-acknowledgments",
    "doc-afterword",
    "doc-appendix",
    "doc-backlink",
    "doc-biblioentry",
    "doc-bibliography",
    "doc-biblioref",
    "doc-chapter",
    "doc-colophon",
    "doc-conclusion",
    "doc-cover",
    "doc-credit",
    "doc-credits",
    "doc-dedication",
    "doc-endnote",
    "doc-endnotes",
    "doc-epigraph",
    "doc-epilogue",
    "doc-errata",
    "doc-example",
    "doc-footnote",
    "doc-foreword",
    "doc-glossary",
    "doc-glossref",
    "doc-index",
    "doc-introduction",
    "doc-noteref",
    "doc-notice",
    "doc-pagebreak",
    "doc-pagefooter",
    "doc-pageheader",
    "doc-pagelist",
    "doc-part",
    "doc-preface",
    "doc-prologue",
    "doc-pullquote",
    "doc-qna",
    "doc-subtitle",
    "doc-tip",
    "doc-toc",
    "graphics-document",
    "graphics-object",
    "graphics-symbol",
];

/// The hint of an ARIA `role` attribute, `None` when it names no role. As ARIA says, the
/// first token that is a role is the element's role, and it replaces the tag's implicit
/// one. The roles the container tags have implicitly weigh as those tags do: `dialog` and
/// `alertdialog` as a `dialog`; `navigation`, `complementary`, `contentinfo` and `form` as
/// `nav`, `aside`, `footer` and `form`, and `banner` (the page's header, not an article's)
/// and `search` as layout too; `main` and `article` as theirs. Every other role weighs 0.
fn role_weight(v: &str) -> Option<i32> {
    let role = v
        .split_ascii_whitespace()
        .find_map(|t| ARIA_ROLES.iter().find(|r| r.eq_ignore_ascii_case(t)))?;
    Some(match *role {
        "dialog" | "alertdialog" => BOILERPLATE,
        "navigation" | "complementary" | "contentinfo" | "banner" | "search" | "form" => LAYOUT,
        "main" | "article" => CONTENT,
        _ => 0,
    })
}

/// The tag part of [`container_weight`]; `None` for elements that are not containers.
pub(super) fn container_tag_weight(name: &str) -> Option<i32> {
    match name {
        "article" | "main" => Some(CONTENT),
        "dialog" => Some(BOILERPLATE),
        "nav" | "aside" | "footer" | "form" => Some(LAYOUT),
        "div" | "section" | "header" | "ul" | "ol" | "table" | "figure" | "span" | "td" => Some(0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hint_word_is_known_and_passes_the_first_letter_filter() {
        for w in HINT_WORDS {
            assert_ne!(word_hint(w.as_bytes()), 0, "{w}");
            assert_ne!(word_hint(w.to_uppercase().as_bytes()), 0, "{w}");
        }
        for w in ["adx", "x", "navs", "contents", "a", "footers", "1ad", "ad1"] {
            assert_eq!(word_hint(w.as_bytes()), 0, "{w}");
        }
    }
}

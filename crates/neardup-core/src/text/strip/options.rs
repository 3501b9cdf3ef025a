//! How a page is stripped: the implementation and the rules of the text rules' revisions. A
//! leaf, so that the implementations take it from here rather than from their parent.

use super::hints;

/// Which stripping implementation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StripMode {
    /// One pass over the bytes, no tree (the fastest; linear).
    #[default]
    Bytes,
    /// html5ever's tokenizer, no tree (the reference for `bytes`).
    Tokens,
    /// scraper tree (HTML5 tree-building rules).
    Tree,
}

/// Options of [`strip`](super::strip).
#[derive(Clone, Copy, Debug)]
pub struct StripOptions {
    /// Implementation.
    pub mode: StripMode,
    /// Input bytes considered at most; the rest is ignored and `truncated` is set.
    pub max_bytes: usize,
    /// Links end where the HTML tree rules end them (a table cell is a scope; an `<a>` ends
    /// an open one). Off: each `<a>` nests and lasts to its end tag, as revision 1 of the
    /// text rules had it. The tree path always follows the tree.
    pub link_scopes: bool,
    /// ARIA roles weigh as the tags that have them implicitly (`role="dialog"` as a
    /// `dialog`, `role="navigation"` as a `nav`, …). Off: tags and class and id words only,
    /// as revisions 1 and 2 of the text rules had it.
    pub aria_roles: bool,
    /// A container named a dialog (a class or id word `dialog`, `dialog2`, …) that is not
    /// rendered (the `hidden` attribute, an inline `display: none`) is a dialog a script
    /// opens, and weighs as a layout container: boilerplate unless it holds most of the
    /// page (then it is a wrapper shown when the page is ready). Off: as revisions 1 to 3
    /// of the text rules had it.
    pub hidden_dialogs: bool,
}

impl StripOptions {
    /// The hints that count ([`hints::HintRules`]).
    pub(super) fn hint_rules(&self) -> hints::HintRules {
        hints::HintRules {
            aria_roles: self.aria_roles,
            hidden_dialogs: self.hidden_dialogs,
        }
    }
}

impl Default for StripOptions {
    fn default() -> Self {
        StripOptions {
            mode: StripMode::Bytes,
            max_bytes: 16 * 1024 * 1024,
            link_scopes: true,
            aria_roles: true,
            hidden_dialogs: true,
        }
    }
}

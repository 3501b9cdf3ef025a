//! The tree path (`--strip tree`): `scraper` parses the document into a tree (the HTML5
//! tree-building rules: implied tags, misnesting repair) and the visible text nodes are
//! walked without recursion.

use super::builder::Builder;
use super::hints::{container_tag_weight, weight_with, HintAttrs, HintRules};
use super::output::{BlockKind, Stripped};
use super::rules::{role, Role};

pub(super) fn strip(html: &str, rules: HintRules) -> Stripped {
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
                    let hint = container_tag_weight(el.name())
                        .map_or(0, |tag| weight_with(tag, &HintAttrs::of(el.attrs()), rules));
                    b.enter(hint);
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

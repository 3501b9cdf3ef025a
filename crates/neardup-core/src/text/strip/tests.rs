//! The stripping paths against fixed pages; `tests/strip_differential.rs` holds the byte
//! scanner to html5ever's tokenizer over real pages.

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
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
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
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
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
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
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

/// Checks, in every strip path, that the three blocks after the first of `html` (a short
/// article) count against the region with the default options and the article alone is
/// the region, and that with the options `before` gives (a rule off) they are plain blocks
/// and the region takes in the one starting with `prefix`.
fn assert_hint_leaves_the_article(
    html: &str,
    before: impl Fn(StripMode) -> StripOptions,
    prefix: &str,
) {
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(html, mode);
        let ctx: Vec<i32> = s.blocks.iter().map(|b| b.context).collect();
        assert_eq!(ctx, [0, -1, -1, -1], "{mode:?}");
        assert_eq!(main_region(&s.blocks), 0..1, "{mode:?}");
        let old = strip(html, &before(mode));
        let ctx: Vec<i32> = old.blocks.iter().map(|b| b.context).collect();
        assert_eq!(ctx, [0, 0, 0, 0], "{mode:?}");
        let r = main_region(&old.blocks);
        assert!(
            old.blocks[r]
                .iter()
                .any(|b| old.block_text(b).starts_with(prefix)),
            "{mode:?}"
        );
    }
}

#[test]
fn aria_roles_weigh_as_their_tags() {
    // a page whose article is short and whose consent banner, a `div` with the dialog role
    // and no telling class, is the longest prose: text rules 3 leave the banner out of the
    // region, text rules 2 took it in
    let consent = "we use cookies to improve the experience of the site and for the purposes of \
                   marketing, and the cookies allow us to remember the preferences"
        .repeat(3);
    let html = format!(
        "<div><p>the short article is about the river and the barrier that the town \
         built</p></div><div id=\"ensNotifyBanner\" role=\"dialog\" aria-label=\"Consent\">\
         <div>{consent}</div></div><section ROLE=alertdialog><p>{consent} again</p></section>\
         <div role=\"x-site navigation\"><p>the links of the site and the pages of \
         the news</p></div>"
    );
    assert_hint_leaves_the_article(
        &html,
        |mode| StripOptions {
            mode,
            aria_roles: false,
            ..Default::default()
        },
        "we use cookies",
    );
    let w = |role: &'static str| container_weight("div", [("role", role)].into_iter());
    assert_eq!(w("alertdialog"), Some(BOILERPLATE));
    assert_eq!(w("Dialog"), Some(BOILERPLATE));
    assert_eq!(w("contentinfo"), Some(LAYOUT));
    assert_eq!(w("complementary"), Some(LAYOUT));
    assert_eq!(w("main"), Some(CONTENT));
    // the first token that is a role is the role (as ARIA says); other roles are no hint
    assert_eq!(w("none main navigation"), Some(0));
    assert_eq!(w("x-custom Main navigation"), Some(CONTENT));
    assert_eq!(w("doc-footnote navigation"), Some(0));
    assert_eq!(w("presentation"), Some(0));
    assert_eq!(w("tabpanel region"), Some(0));
    assert_eq!(w(""), Some(0));
    // an explicit role replaces the tag's implicit one; a token that is no role does not
    let t = |tag: &str, role: &'static str| container_weight(tag, [("role", role)].into_iter());
    assert_eq!(t("aside", "note"), Some(0));
    assert_eq!(t("article", "presentation"), Some(0));
    assert_eq!(t("section", "banner"), Some(LAYOUT));
    assert_eq!(t("nav", "x-menu"), Some(LAYOUT));
    assert_eq!(t("dialog", "alertdialog"), Some(BOILERPLATE));
    // a token that is no role is skipped, one that is (of any module) decides
    assert_eq!(w("doc-bogus dialog"), Some(BOILERPLATE));
    assert_eq!(w("doc-footnote dialog"), Some(0));
    assert_eq!(
        w("dialog\u{b}"),
        Some(0),
        "a vertical tab is not ASCII whitespace"
    );
    // what is not rendered is no hint: streamed page parts, tab panels and accordions
    // wait in hidden containers for a script to show them, and the region is made of them
    let parts = "<p>the council said that the new bridge would open in the spring and that \
                 the old one was to be closed</p>"
        .repeat(3);
    let streamed = format!(
        "<div><p>a short lead</p></div><div hidden id=\"S:0\">{parts}</div>\
         <div style=\"display: none\">{parts}</div>"
    );
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(&streamed, mode);
        let ctx: Vec<i32> = s.blocks.iter().map(|b| b.context).collect();
        assert_eq!(ctx, [0; 7], "{mode:?}");
        assert_eq!(main_region(&s.blocks), 1..7, "{mode:?}");
    }
    // a negative hint of the role wins over a content class, as words do; a layout role
    // around most of the page is a wrapper, as a layout tag is
    assert_eq!(
        container_weight(
            "div",
            [("class", "content"), ("role", "dialog")].into_iter()
        ),
        Some(BOILERPLATE)
    );
    let article = "<p>the council said that the new bridge would open in the spring and that \
                   the old one was to be closed</p>"
        .repeat(6);
    let wrapped =
        format!("<div role=complementary>{article}</div><div role=search><p>{consent}</p></div>");
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(&wrapped, mode);
        let ctx: Vec<i32> = s.blocks.iter().map(|b| b.context).collect();
        assert_eq!(ctx, [0, 0, 0, 0, 0, 0, -1], "{mode:?}");
        assert_eq!(main_region(&s.blocks), 0..6, "{mode:?}");
    }
}

#[test]
fn hidden_dialogs_weigh_as_layout() {
    // a page whose article is short, with the notices of its comment form in two dialogs a
    // script opens (named `dialog` and `dialog1`, not rendered until then): text rules 4
    // leave them out of the region, text rules 3 took them in
    let notice = "if you are asking for a certain plugin or are having a problem with the \
                  tutorial please check the forum for an answer and start a new topic"
        .repeat(3);
    let html = format!(
        "<div><p>the short article is about the river and the barrier that the town \
         built</p></div><div id=\"dialog\" style=\"display:none\" title=\"A question\">\
         <p>{notice}</p></div><div ID=\"Dialog1\" hidden><p>{notice} again</p></div>\
         <div class=\"ui dialog-2\" style=\"color: red; DISPLAY : None !important\">\
         <p>{notice} and more</p></div>"
    );
    assert_hint_leaves_the_article(
        &html,
        |mode| StripOptions {
            mode,
            hidden_dialogs: false,
            ..Default::default()
        },
        "if you are asking",
    );
    // a dialog that is rendered, a word that only starts with `dialog`, and a hidden
    // container named otherwise (a streamed page part, a tab panel) are no hint
    let w = |attrs: &[(&'static str, &'static str)]| container_weight("div", attrs.iter().copied());
    assert_eq!(w(&[("id", "dialog")]), Some(0));
    assert_eq!(w(&[("id", "dialog"), ("style", "display: block")]), Some(0));
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display: nonesuch")]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display: none\u{e9}")]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "x-display: none")]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display: none\0")]),
        Some(0)
    );
    // an inline display decides over `hidden`; `!important` over a later declaration; an
    // empty value is ignored, as CSS ignores an invalid declaration
    assert_eq!(
        w(&[
            ("id", "dialog"),
            ("hidden", ""),
            ("style", "display: block")
        ]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("hidden", ""), ("style", "color: red")]),
        Some(LAYOUT)
    );
    assert_eq!(
        w(&[
            ("id", "dialog"),
            ("style", "display:none!important;display:block")
        ]),
        Some(LAYOUT)
    );
    assert_eq!(
        w(&[
            ("id", "dialog"),
            ("style", "display:block !important; display:none")
        ]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display:none; display: ")]),
        Some(LAYOUT)
    );
    assert_eq!(
        w(&[
            ("id", "dialog"),
            ("style", "display:none; display: !important")
        ]),
        Some(LAYOUT)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display: none\u{fffd}")]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "transition: display 1s")]),
        Some(0)
    );
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display:none;display:block")]),
        Some(0),
        "the last declaration wins"
    );
    assert_eq!(w(&[("class", "dialogue dialogs"), ("hidden", "")]), Some(0));
    assert_eq!(w(&[("class", "x 12"), ("hidden", "")]), Some(0));
    assert_eq!(w(&[("id", "S:0"), ("hidden", "")]), Some(0));
    assert_eq!(
        w(&[("class", "tab-panel"), ("style", "display:none")]),
        Some(0)
    );
    // named a dialog and not rendered: layout (boilerplate unless it holds most of the page)
    assert_eq!(w(&[("id", "dialog"), ("hidden", "")]), Some(LAYOUT));
    assert_eq!(
        w(&[("id", "dialog"), ("style", "display:block;display:none;")]),
        Some(LAYOUT)
    );
    assert_eq!(
        w(&[
            ("class", "ui-dialog2 fade"),
            ("style", "top:0;display:none")
        ]),
        Some(LAYOUT)
    );
    assert_eq!(
        w(&[
            ("class", "content"),
            ("id", "dialog"),
            ("style", "display:none")
        ]),
        Some(LAYOUT),
        "a negative hint wins over a content word"
    );
    assert_eq!(
        w(&[("class", "dialog-off-canvas-main-canvas")]),
        Some(CONTENT),
        "a page wrapper, rendered (its word `main`)"
    );
    assert_eq!(
        w(&[("class", "dialog-off-canvas-main-canvas"), ("hidden", "")]),
        Some(LAYOUT)
    );
    // in every strip path: a hidden page wrapper named so holds the article (a wrapper, as
    // a layout container around most of the page is); the first of a repeated attribute
    // counts, a character reference in a style is decoded
    let article = "<p>the council said that the new bridge would open in the spring and that \
                   the old one was to be closed</p>"
        .repeat(12);
    let wrapped = format!(
        "<div class=\"dialog-off-canvas-main-canvas\" hidden>{article}</div>\
         <div id=dialog style=\"display&#58;none\"><p>{notice}</p></div>\
         <div id=dialog style=display:block style=display:none><p>{notice} shown</p></div>"
    );
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(&wrapped, mode);
        let ctx: Vec<i32> = s.blocks.iter().map(|b| b.context).collect();
        let want: Vec<i32> = [0; 12].into_iter().chain([-1, 0]).collect();
        assert_eq!(ctx, want, "{mode:?}");
        assert_eq!(main_region(&s.blocks), 0..12, "{mode:?}");
    }
    // a NUL after `none` makes another word in every path (the tokenizer reads U+FFFD); an
    // inline display overrides `hidden` (the dialog is shown), `!important` holds against
    // a later declaration, and a dialog named with a reference (`dialog&#49;`) is one
    let shown = format!(
        "<div id=dialog style=\"display:none\0\"><p>{notice} one</p></div>\
         <div id=dialog hidden style=\"display: block\"><p>{notice} two</p></div>\
         <div id=dialog style=\"display:none !important; display:block\"><p>{notice}</p></div>\
         <div id=\"dialog&#49;\" style=\"display:none\"><p>{notice} three</p></div>"
    );
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(&shown, mode);
        let ctx: Vec<i32> = s.blocks.iter().map(|b| b.context).collect();
        assert_eq!(ctx, [0, 0, -1, -1], "{mode:?}");
    }
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
        for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
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
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        for input in &inputs {
            let _ = strip(
                input,
                &StripOptions {
                    mode,
                    max_bytes: 1 << 20,
                    ..Default::default()
                },
            );
        }
        let s = strip(
            &deep,
            &StripOptions {
                mode,
                max_bytes: 1 << 20,
                ..Default::default()
            },
        );
        assert_eq!(s.text, "deep text");
        let p = strip(
            "plain words here",
            &StripOptions {
                mode,
                max_bytes: 1 << 20,
                ..Default::default()
            },
        );
        assert_eq!(p.text, "plain words here");
    }
}

#[test]
fn void_and_stray_tags_hide_nothing_after_them() {
    let html = "<object><embed src=x></embed><embed src=y></object><button>Go\
        <p>first words</p></svg></template><svg><g><svg></svg></g></svg><p>after svg</p>";
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
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
            ..Default::default()
        },
    );
    assert!(s.truncated);
    assert!(s.text.chars().all(|c| c == 'é'));
    assert_eq!(s.text.chars().count(), 3);
}

#[test]
fn links_left_open_in_table_cells_end_with_the_cell() {
    // a "most viewed" box whose links are never closed, then the article: the tree-building
    // rules end each link with its cell, so the article is not link text
    let page = "<html><body><table><tr><td><a href=/1>First story</td></tr>\
        <tr><td><a href=/2>Second story</td></tr></table>\
        <div><p>The article text that follows the box.</p></div>\
        <p><a href=/x>one<a href=/y>two</a> after the links</p>\
        <a href=/z><table><tr><td>inside a linked table</td></tr></table>still linked</a>\
        <p>plain</p></body></html>";
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(page, mode);
        let link_share: Vec<(String, u32, u32)> = s
            .iter()
            .map(|(b, t)| (t.to_string(), b.link_words, b.words))
            .collect();
        let find = |text: &str| {
            link_share
                .iter()
                .find(|(t, _, _)| t == text)
                .unwrap_or_else(|| panic!("{mode:?}: no block {text:?} in {link_share:?}"))
        };
        assert_eq!(find("First story").1, 2, "{mode:?}");
        assert_eq!(
            find("The article text that follows the box.").1,
            0,
            "{mode:?}"
        );
        // links do not nest: the second <a> ends the first, and its end ends both
        assert_eq!(
            find("onetwo after the links").1,
            1,
            "{mode:?}: {link_share:?}"
        );
        // a table inside a link is link text, and the link goes on after it
        assert_eq!(find("inside a linked table").1, 4, "{mode:?}");
        assert_eq!(find("still linked").1, 2, "{mode:?}");
        assert_eq!(find("plain").1, 0, "{mode:?}");
    }
    // a link around a table holds the cell's text after a link of the cell ends
    let nested = "<p><a href=/o><table><tr><td><a href=/i>x</a> y z</td></tr></table></a></p>";
    for mode in [StripMode::Bytes, StripMode::Tokens, StripMode::Tree] {
        let s = strip_in(nested, mode);
        let (b, t) = s.iter().next().expect("a block");
        assert_eq!((t, b.link_words, b.words), ("x y z", 3, 3), "{mode:?}");
    }
    // text rules 1: every <a> nests and lasts to its end tag
    let old = StripOptions {
        link_scopes: false,
        ..Default::default()
    };
    for mode in [StripMode::Bytes, StripMode::Tokens] {
        let s = strip(page, &StripOptions { mode, ..old });
        let article = s
            .iter()
            .find(|(_, t)| *t == "The article text that follows the box.")
            .expect("the article");
        assert_eq!(article.0.link_words, 7, "{mode:?}");
    }
}

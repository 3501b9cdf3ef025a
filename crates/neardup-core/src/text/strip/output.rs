//! What stripping gives: the visible text of a page as blocks. A leaf, so that the
//! implementations and the block builder take it from here rather than from their parent.

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

//! The reference path: html5ever's tokenizer (the HTML standard's tokenizer, no tree)
//! driving the same block rules. `--strip tokens` selects it; the differential test holds
//! the byte scanner to it.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

use super::hints::HintAttrs;
use super::options::StripOptions;
use super::output::Stripped;
use super::rules::{tag_info, Next, Raw, Rules};

struct Sink(RefCell<Rules>);

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut rules = self.0.borrow_mut();
        match token {
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => {
                    let attrs =
                        HintAttrs::of(tag.attrs.iter().map(|a| (&*a.name.local, &*a.value)));
                    match rules.start_tag(&tag.name, tag_info(&tag.name), tag.self_closing, &attrs)
                    {
                        Next::Data => TokenSinkResult::Continue,
                        Next::Plaintext => TokenSinkResult::Plaintext,
                        Next::Raw(Raw::Script) => TokenSinkResult::RawData(RawKind::ScriptData),
                        Next::Raw(Raw::Rawtext) => TokenSinkResult::RawData(RawKind::Rawtext),
                        Next::Raw(Raw::Rcdata) => TokenSinkResult::RawData(RawKind::Rcdata),
                    }
                }
                TagKind::EndTag => {
                    rules.end_tag(&tag.name, tag_info(&tag.name));
                    TokenSinkResult::Continue
                }
            },
            Token::CharacterTokens(text) => {
                rules.text(&text);
                TokenSinkResult::Continue
            }
            // NUL in data (dropped), comments, doctypes, end of input, parse errors
            _ => TokenSinkResult::Continue,
        }
    }
}

/// Strips `html` with html5ever's tokenizer.
pub(super) fn strip(html: &str, opts: &StripOptions) -> Stripped {
    let sink = Sink(RefCell::new(Rules::new(opts)));
    let tok = Tokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    queue.push_back(StrTendril::from_slice(html));
    // The sink never asks to pause for a script, so one feed consumes the whole input.
    let _ = tok.feed(&queue);
    tok.end();
    tok.sink.0.into_inner().finish()
}

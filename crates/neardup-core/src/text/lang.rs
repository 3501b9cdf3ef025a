//! Languages, stemmers and the stopword / antecedent lists shipped as data.

use std::str::FromStr;

use rustc_hash::FxHashSet;

/// A language of the text: selects the stemmer and the default word lists.
///
/// Every language the stemmer library has is listed here; the crate's own enum keeps the
/// stemmer library out of the public interface.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Language {
    Arabic,
    Danish,
    Dutch,
    #[default]
    English,
    Finnish,
    French,
    German,
    Greek,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Tamil,
    Turkish,
}

macro_rules! languages {
    ($($variant:ident => $name:literal),* $(,)?) => {
        impl Language {
            /// Every supported language.
            pub const ALL: &'static [Language] = &[$(Language::$variant),*];

            /// The lowercase name used in flags and config files.
            pub fn name(self) -> &'static str {
                match self { $(Language::$variant => $name),* }
            }

            fn stopword_data(self) -> &'static str {
                match self {
                    $(Language::$variant => include_str!(concat!("stopwords/", $name, ".txt"))),*
                }
            }

            fn algorithm(self) -> rust_stemmers::Algorithm {
                match self { $(Language::$variant => rust_stemmers::Algorithm::$variant),* }
            }
        }
    };
}

languages! {
    Arabic => "arabic", Danish => "danish", Dutch => "dutch", English => "english",
    Finnish => "finnish", French => "french", German => "german", Greek => "greek",
    Hungarian => "hungarian", Italian => "italian", Norwegian => "norwegian",
    Portuguese => "portuguese", Romanian => "romanian", Russian => "russian",
    Spanish => "spanish", Swedish => "swedish", Tamil => "tamil", Turkish => "turkish",
}

impl FromStr for Language {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        Language::ALL
            .iter()
            .copied()
            .find(|l| l.name() == lower)
            .ok_or_else(|| {
                let names: Vec<&str> = Language::ALL.iter().map(|l| l.name()).collect();
                format!("unknown language {s:?} (known: {})", names.join(", "))
            })
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Language {
    /// The shipped stopword list (lowercase words).
    pub fn stopwords(self) -> Vec<&'static str> {
        words(self.stopword_data())
    }

    /// The shipped default antecedents (a subset of the stopwords).
    pub fn antecedents(self) -> Vec<&'static str> {
        let data = include_str!("stopwords/antecedents.txt");
        data.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(lang, _)| lang.trim() == self.name())
            .map(|(_, ws)| ws.split_whitespace().collect())
            .unwrap_or_default()
    }

    /// A stemmer for this language.
    pub fn stemmer(self) -> rust_stemmers::Stemmer {
        rust_stemmers::Stemmer::create(self.algorithm())
    }
}

fn words(data: &str) -> Vec<&str> {
    data.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The stopword and antecedent sets one signer uses.
#[derive(Clone, Debug)]
pub struct WordLists {
    stopwords: FxHashSet<Box<str>>,
    antecedents: FxHashSet<Box<str>>,
    /// Every word is a stopword (text of a language without lists).
    every_word: bool,
}

impl WordLists {
    /// Builds the sets; antecedents are always treated as stopwords too.
    pub fn new<S: AsRef<str>>(stopwords: &[S], antecedents: &[S]) -> WordLists {
        let lower = |w: &S| w.as_ref().trim().to_lowercase().into_boxed_str();
        let antecedents: FxHashSet<Box<str>> = antecedents.iter().map(lower).collect();
        let mut stopwords: FxHashSet<Box<str>> = stopwords.iter().map(lower).collect();
        stopwords.extend(antecedents.iter().cloned());
        WordLists {
            stopwords,
            antecedents,
            every_word: false,
        }
    }

    /// Lists for text in a language that has none: every word is a stopword (no
    /// antecedents), so word shingles take every window of a block.
    pub fn every_word() -> WordLists {
        WordLists {
            stopwords: FxHashSet::default(),
            antecedents: FxHashSet::default(),
            every_word: true,
        }
    }

    /// The shipped lists of a language.
    pub fn for_language(lang: Language) -> WordLists {
        WordLists::new(&lang.stopwords(), &lang.antecedents())
    }

    /// Whether `word` (lowercase) is a stopword.
    pub fn is_stopword(&self, word: &str) -> bool {
        self.every_word || self.stopwords.contains(word)
    }

    /// Whether `word` (lowercase) is an antecedent.
    pub fn is_antecedent(&self, word: &str) -> bool {
        self.antecedents.contains(word)
    }

    /// Number of antecedents.
    pub fn antecedent_count(&self) -> usize {
        self.antecedents.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_data_and_a_stemmer() {
        for &lang in Language::ALL {
            let stop = lang.stopwords();
            assert!(stop.len() >= 30, "{lang}: {} stopwords", stop.len());
            let ante = lang.antecedents();
            assert!(!ante.is_empty(), "{lang}: no antecedents");
            let lists = WordLists::for_language(lang);
            for a in &ante {
                assert_eq!(a.to_lowercase(), *a, "{lang}: antecedent {a} not lowercase");
                assert!(
                    lists.is_antecedent(a) && lists.is_stopword(a),
                    "{lang}: {a}"
                );
            }
            let _ = lang.stemmer().stem("words");
            assert_eq!(lang.name().parse::<Language>(), Ok(lang));
        }
        assert!("klingon".parse::<Language>().is_err());
    }
}

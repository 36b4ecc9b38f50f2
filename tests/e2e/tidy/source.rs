//! A crate's sources as the tidy tests read them: a small Rust lexer (identifiers, `::`,
//! punctuation and string literals, with comments dropped) and the module tree found by
//! following `mod x;` declarations from `lib.rs`, without the code under `#[cfg(test)]`.
//!
//! It is no parser: it knows just enough of Rust's surface (use trees, item keywords, impl
//! headers, brace depth) for `modules.rs` to resolve paths and for `tables.rs` to see SQL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One lexical token; literals other than strings, and lifetimes, are `Other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Token {
    Ident(String),
    /// `::` or a single punctuation character.
    Punct(&'static str),
    /// A string literal's contents (escapes left as written).
    Str(String),
    Other,
}

impl Token {
    pub(super) fn ident(&self) -> Option<&str> {
        match self {
            Token::Ident(name) => Some(name),
            _ => None,
        }
    }

    pub(super) fn is(&self, punct: &str) -> bool {
        matches!(self, Token::Punct(p) if *p == punct)
    }

    pub(super) fn is_word(&self, word: &str) -> bool {
        self.ident() == Some(word)
    }
}

const PUNCTS: &str = "!#$%&()*+,-./;<=>?@[]^{|}~:";

fn punct(c: char) -> &'static str {
    let at = PUNCTS.find(c).unwrap_or(0);
    &PUNCTS[at..at + c.len_utf8()]
}

/// The tokens of `text`, comments dropped.
pub(super) fn lex(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut at = 0;
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        if c.is_whitespace() {
            at += 1;
        } else if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while at < chars.len() {
                if chars[at] == '/' && chars.get(at + 1) == Some(&'*') {
                    depth += 1;
                    at += 2;
                } else if chars[at] == '*' && chars.get(at + 1) == Some(&'/') {
                    depth -= 1;
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    at += 1;
                }
            }
        } else if let Some((contents, end)) = string_at(&chars, at) {
            tokens.push(Token::Str(contents));
            at = end;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                at += 2;
                while at < chars.len() && chars[at] != '\'' {
                    at += 1;
                }
                at += 1;
            } else if chars.get(at + 2) == Some(&'\'') {
                at += 3;
            } else {
                at += 1;
                while at < chars.len() && is_ident(chars[at]) {
                    at += 1;
                }
            }
            tokens.push(Token::Other);
        } else if c.is_ascii_digit() {
            while at < chars.len()
                && (is_ident(chars[at])
                    || (chars[at] == '.' && chars.get(at + 1).is_some_and(char::is_ascii_digit)))
            {
                at += 1;
            }
            tokens.push(Token::Other);
        } else if is_ident(c) {
            let start = at;
            while at < chars.len() && is_ident(chars[at]) {
                at += 1;
            }
            let word: String = chars[start..at].iter().collect();
            // A raw identifier `r#type` is the identifier `type`.
            if word == "r" && chars.get(at) == Some(&'#') {
                at += 1;
                continue;
            }
            tokens.push(Token::Ident(word));
        } else if c == ':' && next == Some(':') {
            tokens.push(Token::Punct("::"));
            at += 2;
        } else {
            tokens.push(Token::Punct(punct(c)));
            at += 1;
        }
    }
    tokens
}

/// A string literal starting at `at` (`"…"`, `b"…"`, `c"…"`, `r#"…"#`, `br"…"`): its
/// contents and the index after it.
fn string_at(chars: &[char], at: usize) -> Option<(String, usize)> {
    let mut start = at;
    if chars.get(start).is_some_and(|&c| c == 'b' || c == 'c') {
        start += 1;
    }
    let raw = chars.get(start) == Some(&'r');
    if raw {
        start += 1;
    }
    let mut hashes = 0;
    while raw && chars.get(start + hashes) == Some(&'#') {
        hashes += 1;
    }
    if chars.get(start + hashes) != Some(&'"') {
        return None;
    }
    // `b`, `r` or `c` must begin the token: `attr"` is no string prefix.
    if at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_') && start != at {
        return None;
    }
    let mut end = start + hashes + 1;
    let mut contents = String::new();
    while end < chars.len() {
        let c = chars[end];
        if !raw && c == '\\' {
            contents.push(c);
            if let Some(&escaped) = chars.get(end + 1) {
                contents.push(escaped);
            }
            end += 2;
            continue;
        }
        if c == '"' && (0..hashes).all(|n| chars.get(end + 1 + n) == Some(&'#')) {
            return Some((contents, end + 1 + hashes));
        }
        contents.push(c);
        end += 1;
    }
    Some((contents, end))
}

/// The index of the token closing the bracket opened at `open` (or the end).
pub(super) fn closing(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (at, token) in tokens.iter().enumerate().skip(open) {
        if token.is("{") || token.is("(") || token.is("[") {
            depth += 1;
        } else if token.is("}") || token.is(")") || token.is("]") {
            depth -= 1;
            if depth == 0 {
                return at;
            }
        }
    }
    tokens.len()
}

/// The end (exclusive) of the item starting at `start`: through its `;` or its `{ … }` block,
/// whichever comes first outside brackets.
fn item_end(tokens: &[Token], start: usize) -> usize {
    let mut at = start;
    while at < tokens.len() {
        let token = &tokens[at];
        if token.is(";") {
            return at + 1;
        }
        if token.is("{") {
            return closing(tokens, at) + 1;
        }
        if token.is("(") || token.is("[") {
            at = closing(tokens, at);
        }
        at += 1;
    }
    tokens.len()
}

/// Whether an attribute `#[…]` starts at `at`, and where it ends (exclusive).
fn attribute_at(tokens: &[Token], at: usize) -> Option<usize> {
    (tokens.get(at)?.is("#") && tokens.get(at + 1)?.is("[")).then(|| closing(tokens, at + 1) + 1)
}

/// A source file's tokens with every item under `#[cfg(test)]` removed, and its
/// declarations of out-of-line modules (`mod x;`), each with its `#[path]` if any.
pub(super) struct Source {
    pub(super) tokens: Vec<Token>,
    pub(super) children: Vec<(String, Option<String>)>,
}

pub(super) fn read(text: &str) -> Source {
    let all = lex(text);
    let mut tokens = Vec::with_capacity(all.len());
    let mut children = Vec::new();
    let mut at = 0;
    // The `#[path]` of the item the last attributes were attached to.
    let mut path = None;
    while at < all.len() {
        let Some(end) = attribute_at(&all, at) else {
            let token = &all[at];
            if token.is_word("mod") && all.get(at + 2).is_some_and(|t| t.is(";")) {
                if let Some(name) = all.get(at + 1).and_then(Token::ident) {
                    children.push((name.to_owned(), path.take()));
                }
            } else if token.is(";") || token.is("{") {
                path = None;
            }
            tokens.push(token.clone());
            at += 1;
            continue;
        };
        // A run of attributes, then what they are attached to.
        let mut attributes = vec![&all[at + 2..end - 1]];
        let mut item = end;
        while let Some(end) = attribute_at(&all, item) {
            attributes.push(&all[item + 2..end - 1]);
            item = end;
        }
        let test_only = attributes.iter().any(|attribute| {
            attribute.len() == 4
                && attribute[0].is_word("cfg")
                && attribute[2].is_word("test")
                && attribute[3].is(")")
        });
        if test_only {
            at = item_end(&all, item);
            continue;
        }
        path = attributes.iter().find_map(|attribute| match attribute {
            [Token::Ident(word), eq, Token::Str(path)] if word == "path" && eq.is("=") => {
                Some(path.clone())
            }
            _ => None,
        });
        tokens.extend(all[at..item].iter().cloned());
        at = item;
    }
    // Inner attributes (`#![…]`) and plain ones stay in `tokens`; they name no module.
    Source { tokens, children }
}

/// The files of the crate whose root is `root_file`, keyed by module path (`""` for the
/// root, `a::b` for a nested module), found by following the `mod` declarations that are
/// not under `#[cfg(test)]`. `files` maps each path relative to the crate's `src` to its text.
pub(super) fn modules(
    files: &BTreeMap<PathBuf, String>,
    root_file: &Path,
) -> BTreeMap<String, (PathBuf, Source)> {
    let mut found = BTreeMap::new();
    let mut pending = vec![(String::new(), root_file.to_path_buf())];
    while let Some((module, file)) = pending.pop() {
        let Some(text) = files.get(&file) else {
            continue;
        };
        let source = read(text);
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        let owns_dir = module.is_empty() || file.file_name().is_some_and(|name| name == "mod.rs");
        let child_dir = if owns_dir {
            dir.clone()
        } else {
            dir.join(file.file_stem().unwrap_or_default())
        };
        for (name, path) in &source.children {
            let child = if module.is_empty() {
                name.clone()
            } else {
                format!("{module}::{name}")
            };
            let child_file = match path {
                Some(path) => dir.join(path),
                None if files.contains_key(&child_dir.join(format!("{name}.rs"))) => {
                    child_dir.join(format!("{name}.rs"))
                }
                None => child_dir.join(name).join("mod.rs"),
            };
            pending.push((child, child_file));
        }
        found.insert(module, (file, source));
    }
    found
}

/// Every `.rs` file under `dir`, keyed by its path relative to `dir`.
pub(super) fn load(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut paths = Vec::new();
    super::rust_files(dir, &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let relative = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
            (relative, text)
        })
        .collect()
}

#[test]
fn the_lexer_sees_strings_and_drops_comments_and_test_code() {
    let source = read(
        r##"//! doc
use crate::a::{b, c as d}; // crate::hidden
/* crate::hidden /* nested */ */
#[cfg(test)]
mod tests { use crate::hidden; }
#[cfg(test)]
mod more_tests;
mod kept;
#[path = "other.rs"]
mod moved;
let s = r#"SELECT "x" FROM t"#; let c = '{'; let l: &'a str = "q\"uote";
"##,
    );
    let words: Vec<&str> = source.tokens.iter().filter_map(Token::ident).collect();
    assert!(!words.contains(&"hidden"), "{words:?}");
    assert!(!words.contains(&"tests"), "{words:?}");
    let strings: Vec<&Token> = source
        .tokens
        .iter()
        .filter(|t| matches!(t, Token::Str(_)))
        .collect();
    assert_eq!(
        strings,
        [
            &Token::Str("other.rs".into()),
            &Token::Str(r#"SELECT "x" FROM t"#.into()),
            &Token::Str(r#"q\"uote"#.into()),
        ]
    );
    assert_eq!(
        source.children,
        [
            ("kept".to_owned(), None),
            ("moved".to_owned(), Some("other.rs".to_owned()))
        ]
    );
}

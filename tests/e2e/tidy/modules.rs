//! The module graph of a crate and its circles (issue #41's "honest circle test").
//!
//! An edge `a -> b` means a file of module `a` uses a name that module `b` *defines*: paths
//! are followed through `crate::`, `self::`, `super::`, child modules, `use` aliases, globs
//! and re-exports (`pub use` in a folder's `mod.rs` or `lib.rs` is plumbing, not a
//! definition), and a method call `.name(…)` is an edge to the file whose inherent `impl`
//! defines `name` when exactly one `fn name` exists in the crate. Code under `#[cfg(test)]`
//! is left out. Circles are checked between files (modules) and between rooms (top-level
//! modules: `work`, `artifacts`, `engine`, …; the crate root is the room `lib`).
//! Long (about 690 lines) because it is a small name resolver over the lexer's tokens.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::source::{self, Source, Token, closing};

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
    "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where", "while",
    "yield", "_",
];

/// What one `use` tree leaf brings into scope.
#[derive(Debug)]
struct Import {
    path: Vec<String>,
    /// The name it is bound to; `None` for a glob, `Some("_")` for `as _`.
    alias: Option<String>,
    /// Whether the `use` re-exports (`pub`, `pub(crate)`, …).
    public: bool,
}

/// One module (one file) as the resolver sees it.
#[derive(Debug, Default)]
struct Module {
    /// Items defined at the file's item level (including in inline `mod x { … }`).
    defines: BTreeSet<String>,
    imports: Vec<Import>,
    /// The file's tokens outside `use` declarations.
    code: Vec<Token>,
}

impl Module {
    fn alias(&self, name: &str) -> Option<&Import> {
        self.imports
            .iter()
            .find(|import| import.alias.as_deref() == Some(name))
    }

    fn globs(&self) -> impl Iterator<Item = &Import> {
        self.imports.iter().filter(|import| import.alias.is_none())
    }
}

/// A crate: its modules by path (`""` is the root), and the inherent methods that are the
/// only `fn` of their name in the crate, with the module defining each.
#[derive(Debug)]
pub(super) struct Crate {
    modules: BTreeMap<String, Module>,
    methods: BTreeMap<String, String>,
}

fn child(module: &str, name: &str) -> String {
    if module.is_empty() {
        name.to_owned()
    } else {
        format!("{module}::{name}")
    }
}

fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(parent, _)| parent)
}

/// How a module is shown: the root is `lib`.
pub(super) fn shown(module: &str) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.to_owned()
    }
}

/// The room (top-level module) of a module.
fn room(module: &str) -> String {
    shown(module.split("::").next().unwrap_or_default())
}

impl Crate {
    /// The crate whose `lib.rs` is in `crate_src` (one of `CRATES`, from the workspace root).
    pub(super) fn load(crate_src: &str) -> Crate {
        Crate::load_from(Path::new(env!("CARGO_MANIFEST_DIR")), crate_src)
    }

    /// The crate whose `lib.rs` is in `crate_src` under the workspace at `root`.
    pub(super) fn load_from(root: &Path, crate_src: &str) -> Crate {
        let mut methods = Methods::default();
        // A method that another of our crates also defines may be that one: no edge.
        for other in CRATES.iter().filter(|other| **other != crate_src) {
            for text in source::load(&root.join(other)).values() {
                let tokens = source::lex(text);
                for pair in tokens.windows(2) {
                    if let (true, Some(name)) = (pair[0].is_word("fn"), pair[1].ident()) {
                        *methods.fn_count.entry(name.to_owned()).or_default() += 1;
                    }
                }
            }
        }
        Crate::read(&source::load(&root.join(crate_src)), methods)
    }

    /// The crate made of `files` (paths relative to its `src`), rooted at `lib.rs`.
    pub(super) fn from_files(files: &BTreeMap<PathBuf, String>) -> Crate {
        Crate::read(files, Methods::default())
    }

    fn read(files: &BTreeMap<PathBuf, String>, mut methods: Methods) -> Crate {
        let mut modules = BTreeMap::new();
        for (name, (_, source)) in source::modules(files, Path::new("lib.rs")) {
            let module = read_module(source, &name, &mut methods);
            modules.insert(name, module);
        }
        let Methods {
            fn_count,
            inherent,
            impl_modules,
        } = methods;
        let methods = inherent
            .into_iter()
            .filter(|(method, (self_type, _))| {
                fn_count.get(method) == Some(&1)
                    && impl_modules.get(self_type).is_some_and(|m| m.len() > 1)
                    && !STD_METHODS.contains(&method.as_str())
            })
            .map(|(method, (_, module))| (method, module))
            .collect();
        Crate { modules, methods }
    }

    /// The module that defines what `path` names when written in `from`, or `None` for a
    /// module itself, a local, or a name from another crate.
    fn resolve(&self, from: &str, path: &[String], hops: usize) -> Option<String> {
        let (first, rest) = path.split_first()?;
        if hops > 32 {
            return None;
        }
        let start = match first.as_str() {
            "crate" => String::new(),
            "self" => from.to_owned(),
            "super" => {
                let mut module = parent(from);
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    module = parent(module);
                    rest = &rest[1..];
                }
                return self.walk(module, rest, hops);
            }
            "Self" => return None,
            name if self.modules.contains_key(&child(from, name)) => child(from, name),
            name => return self.item(from, name, rest, hops, true),
        };
        self.walk(&start, rest, hops)
    }

    /// From module `module`, follow `path` down through modules to the item it names.
    fn walk(&self, module: &str, path: &[String], hops: usize) -> Option<String> {
        let mut module = module.to_owned();
        for (at, name) in path.iter().enumerate() {
            let below = child(&module, name);
            if self.modules.contains_key(&below) {
                module = below;
            } else {
                return self.item(&module, name, &path[at + 1..], hops, false);
            }
        }
        None
    }

    /// The definer of `name` as seen in `module` (then `after` names something inside it).
    /// `local`: `name` starts a path written in `module`, so an unknown name is no item.
    fn item(
        &self,
        module: &str,
        name: &str,
        after: &[String],
        hops: usize,
        local: bool,
    ) -> Option<String> {
        let known = self.modules.get(module)?;
        if known.defines.contains(name) {
            return Some(module.to_owned());
        }
        if let Some(import) = known.alias(name) {
            let mut path = import.path.clone();
            path.extend_from_slice(after);
            return self.resolve(module, &path, hops + 1);
        }
        for glob in known.globs() {
            let Some(source) = self.module_named(module, &glob.path) else {
                continue;
            };
            if self.modules.contains_key(&child(&source, name)) {
                return self.walk(&child(&source, name), after, hops + 1);
            }
            let names = &self.modules[&source];
            if names.defines.contains(name) || names.alias(name).is_some() {
                return self.item(&source, name, after, hops + 1, false);
            }
        }
        // A name written in this module that it neither defines nor imports is a local, a
        // prelude or macro name; a name reached through a path is an item we cannot see
        // (made by a macro, say), so it stays with the module that holds it.
        (!local).then(|| module.to_owned())
    }

    /// The module `path` (written in `from`) names, if it names a module.
    fn module_named(&self, from: &str, path: &[String]) -> Option<String> {
        let (first, rest) = path.split_first()?;
        let mut module = match first.as_str() {
            "crate" => String::new(),
            "self" => from.to_owned(),
            "super" => parent(from).to_owned(),
            name => child(from, name),
        };
        for name in rest {
            module = if name == "super" {
                parent(&module).to_owned()
            } else {
                child(&module, name)
            };
        }
        self.modules.contains_key(&module).then_some(module)
    }

    /// Every use of a name another module defines: (user, definer, what is written).
    pub(super) fn uses(&self) -> Vec<(String, String, String)> {
        let mut uses = Vec::new();
        for (name, module) in &self.modules {
            let mut found = |target: Option<String>, written: String| {
                if let Some(target) = target.filter(|target| target != name) {
                    uses.push((shown(name), shown(&target), written));
                }
            };
            for import in module.imports.iter().filter(|import| !import.public) {
                // A private `use` is used (the build denies unused imports), so even one
                // that only brings a trait's methods into scope is a dependency.
                let written = format!("use {}", import.path.join("::"));
                found(self.resolve(name, &import.path, 0), written);
            }
            for path in paths(&module.code) {
                let written = path.join("::");
                found(self.resolve(name, &path, 0), written.clone());
                // `Type::method` (or `Self::method`) names a method, maybe one defined in
                // another file's `impl Type`.
                if let [.., owner, method] = path.as_slice()
                    && owner.starts_with(|c: char| c.is_ascii_uppercase())
                {
                    found(self.methods.get(method).cloned(), written.clone());
                }
            }
            for method in method_calls(&module.code) {
                found(self.methods.get(method).cloned(), format!(".{method}("));
            }
        }
        uses
    }

    /// Each module's dependencies, with how many uses make each edge.
    pub(super) fn graph(&self) -> Graph {
        let mut graph: Graph = self
            .modules
            .keys()
            .map(|module| (shown(module), BTreeMap::new()))
            .collect();
        for (from, to, _) in self.uses() {
            *graph.entry(from).or_default().entry(to).or_default() += 1;
        }
        graph
    }
}

/// The crates checked, by their sources from the workspace root: `api`, `storage`, and the
/// `weft` library (`src/main.rs` is a crate of its own, left out).
pub(super) const CRATES: [&str; 3] = ["api/src", "storage/src", "src"];

/// Module → module it uses → number of uses.
pub(super) type Graph = BTreeMap<String, BTreeMap<String, usize>>;

/// The graph between rooms: an edge's weight is the number of module edges it sums.
pub(super) fn rooms(graph: &Graph) -> Graph {
    let mut rooms: Graph = BTreeMap::new();
    for (module, edges) in graph {
        let from = room(module);
        let room_edges = rooms.entry(from.clone()).or_default();
        for target in edges.keys() {
            let to = room(target);
            if to != from {
                *room_edges.entry(to).or_default() += 1;
            }
        }
    }
    rooms
}

fn read_module(source: Source, module_name: &str, methods: &mut Methods) -> Module {
    let tokens = source.tokens;
    let mut module = Module::default();
    // What each open brace belongs to: an inline module, an inherent impl, or anything else.
    #[derive(PartialEq)]
    enum Brace {
        Module,
        Inherent(String),
        Other,
    }
    let mut braces: Vec<Brace> = Vec::new();
    let mut pending_brace = Brace::Other;
    let mut at = 0;
    while at < tokens.len() {
        let token = &tokens[at];
        let item_level = braces.iter().all(|brace| *brace == Brace::Module);
        let word = token.ident().unwrap_or_default();
        let next_name = tokens.get(at + 1).and_then(Token::ident);
        if word == "use" {
            let end = (at..tokens.len())
                .find(|&end| tokens[end].is(";"))
                .unwrap_or(tokens.len());
            let public = at > 0 && (tokens[at - 1].is_word("pub") || tokens[at - 1].is(")"));
            let mut leaves = Vec::new();
            use_tree(&tokens[at + 1..end], &mut Vec::new(), &mut leaves);
            for (path, alias) in leaves {
                module.imports.push(Import {
                    path,
                    alias,
                    public,
                });
            }
            at = end + 1;
            continue;
        }
        module.code.push(token.clone());
        match word {
            "fn" => {
                if let Some(name) = next_name {
                    *methods.fn_count.entry(name.to_owned()).or_default() += 1;
                    if let Some((Brace::Inherent(self_type), outer)) = braces.split_last()
                        && outer.iter().all(|brace| *brace == Brace::Module)
                    {
                        let defined = (self_type.clone(), module_name.to_owned());
                        methods.inherent.insert(name.to_owned(), defined);
                    }
                    if item_level {
                        module.defines.insert(name.to_owned());
                    }
                }
            }
            "struct" | "enum" | "trait" | "type" | "static" | "union" | "const" | "mod"
                if item_level =>
            {
                let name = match next_name {
                    Some("mut") => tokens.get(at + 2).and_then(Token::ident),
                    other => other,
                };
                if let Some(name) = name.filter(|name| !KEYWORDS.contains(name)) {
                    module.defines.insert(name.to_owned());
                }
                if word == "mod" && tokens.get(at + 2).is_some_and(|t| t.is("{")) {
                    pending_brace = Brace::Module;
                }
            }
            "macro_rules" if item_level => {
                if let Some(name) = tokens.get(at + 2).and_then(Token::ident) {
                    module.defines.insert(name.to_owned());
                }
            }
            "impl" if item_level && starts_item(tokens[..at].last()) => {
                pending_brace = match inherent_type(&tokens[at + 1..]) {
                    Some(self_type) => {
                        let modules = methods.impl_modules.entry(self_type.clone()).or_default();
                        modules.insert(module_name.to_owned());
                        Brace::Inherent(self_type)
                    }
                    None => Brace::Other,
                };
            }
            _ => {}
        }
        if token.is("{") {
            braces.push(std::mem::replace(&mut pending_brace, Brace::Other));
        } else if token.is("}") {
            braces.pop();
        } else if token.is(";") {
            pending_brace = Brace::Other;
        }
        at += 1;
    }
    module
}

/// Whether an item may start after `previous` (so `impl` opens a block, not `-> impl Trait`).
fn starts_item(previous: Option<&Token>) -> bool {
    previous.is_none_or(|token| {
        token.is("}") || token.is(";") || token.is("]") || token.is("{") || token.is_word("unsafe")
    })
}

/// The type an `impl` header (the tokens after `impl`) is for, if it is an inherent impl.
fn inherent_type(header: &[Token]) -> Option<String> {
    let end = header
        .iter()
        .position(|t| t.is("{") || t.is(";") || t.is_word("where"))
        .unwrap_or(header.len());
    let header = &header[..end];
    let is_trait_impl = header.iter().enumerate().any(|(at, token)| {
        token.is_word("for") && !header.get(at + 1).is_some_and(|next| next.is("<"))
    });
    if is_trait_impl {
        return None;
    }
    // Skip the impl's own generics, then take the last segment of the type's path.
    let mut at = 0;
    if header.first().is_some_and(|t| t.is("<")) {
        let mut depth = 0;
        for (position, token) in header.iter().enumerate() {
            let arrow = position > 0 && header[position - 1].is("-");
            if token.is("<") {
                depth += 1;
            } else if token.is(">") && !arrow {
                depth -= 1;
                if depth == 0 {
                    at = position + 1;
                    break;
                }
            }
        }
    }
    header[at..]
        .iter()
        .take_while(|t| !t.is("<"))
        .filter_map(Token::ident)
        .filter(|word| !KEYWORDS.contains(word))
        .last()
        .map(str::to_owned)
}

/// What the resolver learns of methods while reading the modules.
#[derive(Debug, Default)]
struct Methods {
    /// How many `fn`s of each name the crate has.
    fn_count: BTreeMap<String, usize>,
    /// Each method of an inherent impl: its type and module (the last one read, if several).
    inherent: BTreeMap<String, (String, String)>,
    /// The modules holding an inherent impl of each type.
    impl_modules: BTreeMap<String, BTreeSet<String>>,
}

/// Method names that std's types (or common traits) have too: a call `.len()` tells nothing
/// of which type's method it is, so these never make an edge.
const STD_METHODS: &[&str] = &[
    "as_str",
    "push",
    "len",
    "write",
    "read",
    "take",
    "send",
    "remove",
    "key",
    "chain",
    "update",
    "path",
    "clear",
    "into_body",
    "body",
    "lock",
    "create",
    "count",
    "bytes",
    "value",
    "saturating_add",
    "sorted",
    "since",
    "finish",
    "get",
    "insert",
    "contains",
    "iter",
    "next",
    "map",
    "run",
    "close",
    "flush",
    "open",
    "join",
    "spawn",
    "wait",
    "reset",
    "start",
    "stop",
    "size",
    "status",
    "kind",
    "name",
    "id",
    "filter",
    "parse",
    "load",
    "scope",
];

/// Parses a `use` tree (after `use`, before `;`) into (path, alias) leaves; a glob's alias
/// is `None`.
fn use_tree(
    tokens: &[Token],
    prefix: &mut Vec<String>,
    leaves: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let depth = prefix.len();
    let mut at = 0;
    if tokens.first().is_some_and(|t| t.is("::")) {
        at += 1;
    }
    while at < tokens.len() {
        let token = &tokens[at];
        if let Some(name) = token.ident() {
            if name == "as" {
                let alias = tokens.get(at + 1).map(|t| match t {
                    Token::Ident(alias) => alias.clone(),
                    _ => "_".to_owned(),
                });
                leaves.push((prefix.clone(), alias));
                prefix.truncate(depth);
                return;
            }
            prefix.push(name.to_owned());
            at += 1;
        } else if token.is("::") {
            at += 1;
        } else if token.is("*") {
            leaves.push((prefix.clone(), None));
            prefix.truncate(depth);
            return;
        } else if token.is("{") {
            let end = closing(tokens, at);
            let inner = &tokens[at + 1..end.min(tokens.len())];
            let mut item_start = 0;
            let mut nesting = 0;
            for (position, token) in inner.iter().enumerate() {
                if token.is("{") {
                    nesting += 1;
                } else if token.is("}") {
                    nesting -= 1;
                } else if token.is(",") && nesting == 0 {
                    use_tree(&inner[item_start..position], prefix, leaves);
                    item_start = position + 1;
                }
            }
            use_tree(&inner[item_start..], prefix, leaves);
            prefix.truncate(depth);
            return;
        } else {
            at += 1;
        }
    }
    if prefix.len() > depth {
        // `a::b::{self}` imports `a::b` as `b`.
        if prefix.last().is_some_and(|last| last == "self") {
            prefix.pop();
        }
        let alias = prefix.last().cloned();
        leaves.push((prefix.clone(), alias));
    }
    prefix.truncate(depth);
}

/// Every path written in `code`, as segments, that could name an item: a run of
/// `a::b::c` not preceded by `.` or `::`, leaving out keywords, the names that items,
/// bindings, fields and macros introduce, and named fields.
fn paths(code: &[Token]) -> Vec<Vec<String>> {
    let introduces = [
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "mod",
        "const",
        "static",
        "let",
        "mut",
        "union",
        "macro_rules",
        "ref",
    ];
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let Some(first) = code[at].ident() else {
            at += 1;
            continue;
        };
        let previous = at.checked_sub(1).map(|p| &code[p]);
        let continues = previous.is_some_and(|p| p.is(".") || p.is("::"));
        let introduced = previous
            .and_then(Token::ident)
            .is_some_and(|word| introduces.contains(&word));
        let mut segments = vec![first.to_owned()];
        let mut end = at + 1;
        while code.get(end).is_some_and(|t| t.is("::")) {
            match code.get(end + 1).and_then(Token::ident) {
                Some(name) => segments.push(name.to_owned()),
                None => break,
            }
            end += 2;
        }
        let single = segments.len() == 1;
        let next = code.get(end);
        let field_or_macro = single && next.is_some_and(|t| t.is(":") || t.is("!"));
        let keyword = KEYWORDS.contains(&first) && !["crate", "self", "super"].contains(&first);
        if !(continues || introduced || field_or_macro || keyword) {
            found.push(segments);
        }
        at = end;
    }
    found
}

/// The names of methods called as `.name(…)` or `.name::<…>(…)`.
fn method_calls(code: &[Token]) -> impl Iterator<Item = &str> {
    code.windows(3).filter_map(|window| {
        let called = window[2].is("(") || window[2].is("::");
        (window[0].is(".") && called)
            .then(|| window[1].ident())
            .flatten()
    })
}

/// The strongly connected components of `graph` with more than one member, each sorted,
/// in sorted order (Tarjan's algorithm).
pub(super) fn knots(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(state: &mut State<'g>, node: &'g str) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
            if !state.index.contains_key(next.as_str()) {
                visit(state, next);
                let low = state.low[node].min(state.low[next.as_str()]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next.as_str()) {
                let low = state.low[node].min(state.index[next.as_str()]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}

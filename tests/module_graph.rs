//! The crate's module graph has no cycle (ARCHITECTURE.md: "dependencies point one way").
//!
//! Every file under `src/` (not `src/bin`) is a node: `a/b.rs` and `a/b/mod.rs` are module `a::b`, `lib.rs`
//! the crate root. A file depends on the file that defines each item its code names — `crate::…`, `super::…`,
//! `self::…` or a child module by its bare name, in `use` trees (`use crate::{a, b::c}`) and anywhere in
//! code: the path's longest prefix that is a module, followed through that module's `pub use` re-exports. So
//! `crate::config::LogSettings` is an edge to `config/settings.rs`, not to `config/mod.rs`: a re-export
//! hides no cycle. A child naming its parent (`super::Driver`) is an edge to the parent's file; a parent
//! naming its own descendants is not (they are its parts: `driver/mod.rs` picks the drivers that implement its
//! trait), nor is declaring `mod x;`; so `lib.rs`, the parent of all, depends on nothing. Comments, doc
//! comments, strings and `#[cfg(test)]` modules are skipped (unit tests may use any module). A cycle is a
//! strongly connected component (Tarjan) of more than one file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A token of Rust code; comments, strings and char literals are dropped, lifetimes are idents.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut out) = (0, Vec::new());
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 1;
                } else if c[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            i = j;
        } else if ch == '"' || ((ch == 'r' || ch == 'b') && matches!(at(i + 1), '"' | '#' | 'r')) {
            // Strings: "…", b"…", r#"…"#, br#"…"# (an ident like `r` or `br` alone falls through below).
            let mut j = i;
            while matches!(at(j), 'b' | 'r') {
                j += 1;
            }
            let raw = j > i && c[j - 1] == 'r';
            let hashes = (j..).take_while(|&k| at(k) == '#').count();
            if at(j + hashes) != '"' {
                let start = i;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
                out.push(Tok::Ident(c[start..i].iter().collect()));
                continue;
            }
            j += hashes + 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if !raw && c[j] == '\\' {
                    j += 2;
                    continue;
                }
                if c[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if ch == '\'' {
            // A char literal ('x', '\n', b'x' is caught as ident `b` + this), else a lifetime.
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
    }
    out
}

/// Parses a path (or use tree) at `toks[*i]`, pushing every full path it names onto `out`.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) if s != "as" => {
                if s != "self" || path.is_empty() {
                    path.push(s.clone());
                }
                *i += 1;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                while !matches!(toks.get(*i), None | Some(Tok::Punct('}'))) {
                    use_tree(toks, i, path.clone(), out);
                    if toks.get(*i) == Some(&Tok::Punct(',')) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => break,
        }
        if toks.get(*i) != Some(&Tok::PathSep) {
            break;
        }
        *i += 1;
    }
    if toks.get(*i) == Some(&Tok::Ident("as".into())) {
        *i += 2;
    }
    out.push(path);
}

/// Absolute paths (without `crate`) named by the code of the file of module `module`, each with whether a
/// `pub use` / `pub(crate) use` re-exports it.
fn references(
    src: &str,
    module: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Vec<(Vec<String>, bool)> {
    let toks = lex(src);
    let mut out = Vec::new();
    let mut reexport = false;
    // Inline `mod x { … }`: (name, brace depth inside it, is it #[cfg(test)]).
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let (mut depth, mut cfg_test, mut i) = (0usize, false, 0);
    while i < toks.len() {
        let after_sep = i > 0 && toks[i - 1] == Tok::PathSep;
        match &toks[i] {
            Tok::Punct('#') if toks.get(i + 2) == Some(&Tok::Ident("cfg".into())) => {
                cfg_test |= toks.get(i + 4) == Some(&Tok::Ident("test".into()));
                i += 1;
                continue;
            }
            Tok::Ident(m) if m == "mod" && toks.get(i + 2) == Some(&Tok::Punct('{')) => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    let test = cfg_test || inline.last().is_some_and(|m| m.2);
                    inline.push((name.clone(), depth + 1, test));
                }
                i += 2;
                continue;
            }
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Punct(';') => (cfg_test, reexport) = (false, false),
            Tok::Ident(u) if u == "use" => {
                let pub_at = |k: usize| i >= k && toks[i - k] == Tok::Ident("pub".into());
                reexport = pub_at(1) || (i > 0 && toks[i - 1] == Tok::Punct(')') && pub_at(4));
            }
            Tok::Ident(first) if !after_sep && toks.get(i + 1) == Some(&Tok::PathSep) => {
                let in_test = inline.last().is_some_and(|m| m.2);
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|m| m.0.clone()));
                let child = [module, std::slice::from_ref(first)].concat();
                let base = match first.as_str() {
                    "crate" => Some(Vec::new()),
                    "self" => Some(here),
                    "super" => {
                        let mut base = here;
                        let mut j = i;
                        while toks.get(j) == Some(&Tok::Ident("super".into())) {
                            base.pop();
                            j += 2;
                        }
                        i = j - 2;
                        Some(base)
                    }
                    _ if modules.contains(&child) => Some(module.to_vec()),
                    _ => None,
                };
                if let Some(base) = base {
                    let mut j = if first == "crate" || first == "self" || first == "super" {
                        i + 2
                    } else {
                        i
                    };
                    let mut paths = Vec::new();
                    use_tree(&toks, &mut j, base, &mut paths);
                    if !in_test {
                        out.extend(paths.into_iter().map(|p| (p, reexport)));
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        if !matches!(
            toks[i],
            Tok::Punct('#' | '[' | ']' | '(' | ')' | ',' | '=') | Tok::Ident(_)
        ) {
            cfg_test = false;
        }
        i += 1;
    }
    out
}

/// `src/a/b.rs`, `src/a/b/mod.rs` → `["a", "b"]`; `src/lib.rs` → `[]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    if last != "mod.rs" && last != "lib.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && path.file_name().unwrap() != "bin" {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Tarjan's strongly connected components of more than one node.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, (n, n));
        s.stack.push(v);
        for w in &s.graph[v] {
            match s.index.get(w.as_str()).copied() {
                None => {
                    visit(s, w);
                    let low = s.index[w.as_str()].1.min(s.index[v].1);
                    s.index.get_mut(v).unwrap().1 = low;
                }
                Some((wi, _)) if s.stack.contains(&w.as_str()) => {
                    let low = wi.min(s.index[v].1);
                    s.index.get_mut(v).unwrap().1 = low;
                }
                _ => {}
            }
        }
        if s.index[v].0 == s.index[v].1 {
            let at = s.stack.iter().rposition(|x| *x == v).unwrap();
            let scc: Vec<String> = s.stack.drain(at..).map(String::from).collect();
            if scc.len() > 1 {
                s.found.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let file_of: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap();
            (module_of(rel), rel.to_string_lossy().into_owned())
        })
        .collect();
    let modules: BTreeSet<Vec<String>> = file_of.keys().cloned().collect();
    let refs: BTreeMap<&Vec<String>, Vec<(Vec<String>, bool)>> = file_of
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            (module, references(&text, module, &modules))
        })
        .collect();
    // Per module, the names it re-exports and the paths they stand for.
    let reexports: BTreeMap<&Vec<String>, BTreeMap<&String, &Vec<String>>> = refs
        .iter()
        .map(|(m, r)| {
            (
                *m,
                r.iter()
                    .filter(|p| p.1)
                    .filter_map(|p| Some((p.0.last()?, &p.0)))
                    .collect(),
            )
        })
        .collect();
    // The module defining what `path` names: its longest module prefix, through re-exports.
    let resolve = |mut path: Vec<String>| {
        for _ in 0..8 {
            let mut module = path.clone();
            while !modules.contains(&module) {
                module.pop();
            }
            match path
                .get(module.len())
                .and_then(|name| reexports[&module].get(name))
            {
                Some(target) => path = [target, &path[module.len() + 1..]].concat(),
                None => return module,
            }
        }
        panic!("re-export loop at {path:?}")
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, paths) in &refs {
        let edges = graph.entry(file_of[*module].clone()).or_default();
        for (path, _) in paths {
            let target = resolve(path.clone());
            if !target.starts_with(module) {
                edges.insert(file_of[&target].clone());
            }
        }
    }
    assert!(graph.len() > 80, "too few modules found: {}", graph.len());
    let found = cycles(&graph);
    let report: Vec<String> = found
        .iter()
        .map(|scc| {
            let edges: Vec<String> = scc
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| scc.contains(b))
                        .map(move |b| format!("{a} → {b}"))
                })
                .collect();
            format!(
                "cycle through {}:\n    {}",
                scc.join(", "),
                edges.join("\n    ")
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} module cycle(s):\n{}",
        found.len(),
        report.join("\n")
    );
}

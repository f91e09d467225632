//! Facts the docs state in more than one place, or about another file, kept true: a figure quoted
//! in a summary is one its section measured, two docs quote the same measurement, and the README
//! names where `make run` leaves the binary. Figures are compared as numbers (a summary may round
//! them), never as sentences. CONTRIBUTING.md's list of crates and its recipes match the tree, and
//! so does its layering: no two modules of a crate import each other, however indirectly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// A number or a range (`17.8`, `1,000`, `41–45`, `1.7–1.9`) as (low, high, decimals).
#[derive(Debug, Clone, Copy)]
struct Figure {
    low: f64,
    high: f64,
    decimals: usize,
}

impl Figure {
    /// Whether `self` is `other`, or `other` rounded to `self`'s decimals (a summary may round).
    fn rounds(&self, other: &Figure) -> bool {
        let scale = 10f64.powi(self.decimals as i32);
        let round = |v: f64| (v * scale).round() / scale;
        other.decimals >= self.decimals && round(other.low) == self.low && round(other.high) == self.high
    }
}

/// Every figure in `text`, in order.
fn figures(text: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let number = |i: &mut usize| -> Option<(f64, usize)> {
        let start = *i;
        while *i < chars.len() && (chars[*i].is_ascii_digit() || chars[*i] == ',' || chars[*i] == '.') {
            // A trailing comma or full stop ends the sentence, not the number.
            if !chars[*i].is_ascii_digit() && !chars.get(*i + 1).is_some_and(char::is_ascii_digit) {
                break;
            }
            *i += 1;
        }
        let s: String = chars[start..*i].iter().filter(|c| **c != ',').collect();
        let decimals = s.split_once('.').map_or(0, |(_, d)| d.len());
        s.parse().ok().map(|v| (v, decimals))
    };
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts_number {
            // A word with digits in it (`p99`, `v2.3`, `h2`) is not a figure: skip all of it.
            if chars[i].is_alphanumeric() {
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                    i += 1;
                }
            } else {
                i += 1;
            }
            continue;
        }
        let Some((low, decimals)) = number(&mut i) else {
            i += 1;
            continue;
        };
        let mut figure = Figure { low, high: low, decimals };
        if chars.get(i) == Some(&'–') && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            i += 1;
            if let Some((high, d)) = number(&mut i) {
                figure = Figure { low, high, decimals: decimals.max(d) };
            }
        }
        out.push(figure);
    }
    out
}

/// The body of the `## {title}` section of `doc` (up to the next `## `).
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let head = format!("\n## {title}\n");
    let start = doc.find(&head).unwrap_or_else(|| panic!("no section {head:?}")) + head.len();
    let end = doc[start..].find("\n## ").map_or(doc.len(), |e| start + e);
    &doc[start..end]
}

/// The cells of the markdown table rows in `text` whose first cell starts with `first`.
fn rows<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells[0].starts_with(first))
        .collect()
}

#[test]
fn figures_are_read_as_numbers_and_ranges() {
    let f = figures("168–176 / 135–149 MiB, 1.7–1.9 s, 41–45 ms at 10,000 files (v2.3).");
    let pairs: Vec<(f64, f64)> = f.iter().map(|f| (f.low, f.high)).collect();
    assert_eq!(pairs, [(168.0, 176.0), (135.0, 149.0), (1.7, 1.9), (41.0, 45.0), (10000.0, 10000.0)]);
    let summary = figures("41–45")[0];
    assert!(summary.rounds(&figures("41.3–45.4")[0]));
    assert!(!summary.rounds(&figures("41.3–46.4")[0]));
    assert!(!figures("2.2")[0].rounds(&figures("2")[0]), "a figure with fewer decimals is not the source");
}

/// The summary table at the top of docs/benchmarks.md quotes the controller's sections: every
/// figure of its controller rows, target and result, is one those sections give (perhaps rounded).
/// A summary left behind when a section is re-measured fails here.
#[test]
fn the_benchmarks_summary_quotes_the_controller_sections() {
    let doc = read("docs/benchmarks.md");
    let summary = &doc[..doc.find("\n## ").expect("sections after the summary")];
    let sections = [section(&doc, "controller"), section(&doc, "Controller at scale")];
    let measured: Vec<Figure> = sections.iter().flat_map(|s| figures(s)).collect();
    let controller_rows = rows(summary, "controller");
    assert_eq!(controller_rows.len(), 2, "the summary's controller rows: {controller_rows:?}");
    for cells in controller_rows {
        for cell in &cells[1..] {
            for figure in figures(cell) {
                assert!(
                    measured.iter().any(|m| figure.rounds(m)),
                    "the summary row {:?} quotes {figure:?} ({cell:?}), which the controller sections do not give",
                    cells[0]
                );
            }
        }
    }
}

/// docs/ci.md quotes the peak memory of `validate --git-base` from docs/benchmarks.md: each
/// "N MiB at F files" it gives is a row of the benchmark's table, and the benchmark's summary row
/// agrees with its table at 10,000 files.
#[test]
fn ci_and_benchmarks_agree_on_git_base_memory() {
    let bench = read("docs/benchmarks.md");
    let table: Vec<(f64, f64)> = rows(section(&bench, "`validate`"), "")
        .into_iter()
        .filter(|cells| cells.len() == 4 && cells[0].starts_with(|c: char| c.is_ascii_digit()))
        .map(|cells| (figures(cells[0])[0].low, figures(cells[2])[0].low))
        .collect();
    assert!(table.len() >= 2, "the validate table (files, peak RSS): {table:?}");

    let ci = read("docs/ci.md");
    let bullet = ci.split("\n- ").find(|b| b.starts_with("**`--git-base REF`**")).expect("the --git-base bullet");
    let mut quoted = Vec::new();
    for part in bullet.split(" MiB at ").skip(1).zip(bullet.split(" MiB at ")) {
        let (after, before) = part;
        let mib = figures(before).last().copied().expect("a figure before MiB");
        let files = figures(after).first().copied().expect("a figure after `at`");
        quoted.push((files.low, mib.low));
    }
    assert!(!quoted.is_empty(), "docs/ci.md's --git-base bullet quotes no measured memory:\n{bullet}");
    for (files, mib) in &quoted {
        assert!(
            table.contains(&(*files, *mib)),
            "docs/ci.md says {mib} MiB at {files} files; docs/benchmarks.md measured {table:?}"
        );
    }

    let summary = &bench[..bench.find("\n## ").unwrap()];
    let row = rows(summary, "`validate`").pop().expect("the summary's validate row");
    let files = figures(row[0])[0].low;
    let at = table.iter().find(|(f, _)| *f == files).expect("the summary's file count is in the table");
    assert!(
        figures(row[2]).iter().any(|f| f.low == at.1 && f.high == at.1),
        "the summary says {:?} at {files} files, the table {} MiB",
        row[2],
        at.1
    );
}

/// The README's first screen says where `make run` leaves the binary, and that is where the
/// Makefile's `run` recipe builds it: `target/debug` for the dev profile, `target/release` with
/// `--release`, `target/<profile>` with `--profile`.
#[test]
fn the_readme_names_where_make_run_puts_the_binary() {
    let makefile = read("Makefile");
    let recipe = makefile.split("\nrun:\n").nth(1).expect("a run target").lines().next().unwrap().to_string();
    assert!(recipe.contains("run --bin trainguard"), "{recipe}");
    let words: Vec<&str> = recipe.split_whitespace().collect();
    let profile = if words.contains(&"--release") {
        "release".to_string()
    } else if let Some(i) = words.iter().position(|w| *w == "--profile") {
        words[i + 1].to_string()
    } else if let Some(p) = words.iter().find_map(|w| w.strip_prefix("--profile=")) {
        p.to_string()
    } else {
        "debug".to_string()
    };
    let readme = read("README.md");
    let first_screen = &readme[..readme.find("\n## ").expect("a first section")];
    let path = format!("target/{profile}/trainguard");
    assert!(first_screen.contains(&format!("`{path}`")), "README's first screen does not name {path}");
    assert!(first_screen.contains("CARGO_TARGET_DIR"), "README's first screen: the binary moves with CARGO_TARGET_DIR");
}

// CONTRIBUTING.md against the tree: the crates it lists, and the files its recipes for a Trainer
// release and a validating rule send a contributor to.

/// The workspace's members, as `Cargo.toml` lists them.
fn members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let line = manifest.lines().find(|l| l.starts_with("members = [")).unwrap();
    line.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

#[test]
fn the_layout_counts_and_names_every_crate() {
    let text = read("CONTRIBUTING.md");
    let members = members();
    let words = ["One crate", "Two crates", "Three crates", "Four crates", "Five crates", "Six crates"];
    let said = format!("{} in one workspace", words[members.len() - 1]);
    assert!(text.contains(&said), "CONTRIBUTING.md should say {said:?}: the workspace has {members:?}");
    for member in members.iter().filter(|m| *m != ".") {
        assert!(text.contains(&format!("`{member}`")), "CONTRIBUTING.md does not name the crate {member}");
    }
}

#[test]
fn the_recipes_name_files_that_exist() {
    let text = read("CONTRIBUTING.md");
    // (section, a file it must send the contributor to, what that file must hold)
    let cases = [
        ("Adding a Trainer release", "crates/core/src/trainer/releases.rs", "const RELEASES"),
        ("Adding a validating rule, end to end", "crates/core/src/admission/rule.rs", "rules! {"),
    ];
    for (heading, file, holds) in cases {
        let recipe = section(&text, heading);
        assert!(recipe.contains(&format!("`{file}`")), "{heading}: does not name {file}");
        assert!(read(file).contains(holds), "{file} has no {holds:?}, which {heading:?} sends one to");
        // Every path the recipe names (whose first part is in the tree) exists; `<tag>` stands for one.
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for path in recipe.split('`').skip(1).step_by(2) {
            let first = path.split('/').next().unwrap_or("");
            if !path.contains('/') || path.contains(['<', ' ']) || first.is_empty() || !root.join(first).exists() {
                continue;
            }
            assert!(root.join(path).exists(), "{heading}: {path} does not exist");
        }
    }
}

/// The top-level modules of the crate whose source is `src` (relative to the repository), each
/// with the modules its code names as `crate::<module>` (comments aside, so a doc link is no
/// import).
fn imports(src: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let module = |path: &Path| {
        let first = path.strip_prefix(&root).unwrap().components().next().unwrap();
        first.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let from = module(&path);
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
            let names = code.flat_map(|l| l.split("crate::").skip(1).flat_map(modules_named).collect::<Vec<_>>());
            let to: BTreeSet<String> = names.filter(|m| !m.is_empty() && *m != from).collect();
            out.entry(from).or_default().extend(to);
        }
    }
    out
}

/// The modules a path after `crate::` names: its first part, or each first part of a `{…}` list.
fn modules_named(rest: &str) -> Vec<String> {
    let ident =
        |s: &str| s.trim_start().split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("").to_string();
    match rest.strip_prefix('{') {
        Some(list) => list.split('}').next().unwrap_or("").split(',').map(ident).collect(),
        None => vec![ident(rest)],
    }
}

/// "`src/controller` imports it, never the reverse", and the core's "no arrows back up": in the
/// binary and in the core, the modules' imports never come back to where they started.
#[test]
fn no_module_imports_itself_through_others() {
    for src in ["src", "crates/core/src"] {
        let imports = imports(src);
        for start in imports.keys() {
            // Every module `start` reaches, with the path it took.
            let mut reached: BTreeMap<&str, Vec<&str>> = BTreeMap::from([(start.as_str(), vec![start.as_str()])]);
            let mut todo = vec![start.as_str()];
            while let Some(at) = todo.pop() {
                for next in imports.get(at).into_iter().flatten() {
                    let path = [reached[at].clone(), vec![next.as_str()]].concat();
                    assert_ne!(next, start, "{src}: a loop of imports: {}", path.join(" -> "));
                    if !reached.contains_key(next.as_str()) {
                        reached.insert(next, path);
                        todo.push(next);
                    }
                }
            }
        }
    }
    let binary = imports("src");
    assert!(binary["controller"].contains("cluster"), "the controller reads the cluster index");
}

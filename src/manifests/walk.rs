//! Which files to read: paths as given, directories walked, `-` for stdin.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::parse::{Format, parse};
use super::{Document, Limits, ManifestError, is_manifest_path};

/// One input: a file on disk or standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    /// The name documents and errors carry: the path as given, `-` for stdin.
    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "-".to_string(),
            Source::File(path) => path.display().to_string(),
        }
    }
}

/// The files `paths` stand for, in order: a file as given (whatever its extension), a
/// directory walked recursively in name order for `*.yaml`, `*.yml` and `*.json` (skipping
/// hidden entries such as `.git`; symlinked directories are not followed), `-` for stdin.
pub fn sources(paths: &[PathBuf]) -> Result<Vec<Source>, ManifestError> {
    let mut out = Vec::new();
    let mut stdin_seen = false;
    for path in paths {
        if path.as_os_str() == "-" {
            if stdin_seen {
                return Err(ManifestError::StdinTwice);
            }
            stdin_seen = true;
            out.push(Source::Stdin);
            continue;
        }
        let meta = fs::metadata(path).map_err(|e| ManifestError::io(path.display().to_string(), e))?;
        if meta.is_dir() {
            walk_dir(path, &mut out)?;
        } else {
            out.push(Source::File(path.clone()));
        }
    }
    Ok(out)
}

fn walk_dir(dir: &Path, out: &mut Vec<Source>) -> Result<(), ManifestError> {
    let io_err = |e| ManifestError::io(dir.display().to_string(), e);
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let file_type = entry.file_type().map_err(io_err)?;
        entries.push((entry.path(), file_type));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, file_type) in entries {
        if file_type.is_dir() {
            walk_dir(&path, out)?;
        } else if is_manifest_path(&path) && (file_type.is_file() || path.is_file()) {
            // `validate .` names files as git does: `jobs/a.yaml`, not `./jobs/a.yaml`.
            let path = path.strip_prefix(".").map(Path::to_path_buf).unwrap_or(path);
            out.push(Source::File(path));
        }
    }
    Ok(())
}

/// Reads and parses one source, refusing more than `limits.max_file_bytes`.
pub(crate) fn read_source(source: &Source, limits: &Limits) -> Result<Vec<Document>, ManifestError> {
    let name = source.name();
    let bytes = match source {
        Source::Stdin => read_capped(io::stdin().lock(), &name, limits.max_file_bytes)?,
        Source::File(path) => {
            let file = fs::File::open(path).map_err(|e| ManifestError::io(&name, e))?;
            let len = file.metadata().map_err(|e| ManifestError::io(&name, e))?.len();
            if len > limits.max_file_bytes {
                return Err(ManifestError::TooLarge { source_name: name, limit: limits.max_file_bytes });
            }
            read_capped(file, &name, limits.max_file_bytes)?
        }
    };
    let format = match source {
        Source::Stdin => Format::Sniff,
        Source::File(path) => Format::of_path(path),
    };
    parse(&name, &bytes, format, limits)
}

/// Reads at most `limit` bytes; one more means the input is too large (pipes have no length).
fn read_capped(reader: impl Read, name: &str, limit: u64) -> Result<Vec<u8>, ManifestError> {
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| ManifestError::io(name, e))?;
    if bytes.len() as u64 > limit {
        return Err(ManifestError::TooLarge { source_name: name.to_string(), limit });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_directories_in_order_and_skips_hidden_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for file in ["b.yaml", "a/z.yml", "a/y.json", "a/readme.md", ".git/x.yaml", "a/.hidden.yaml", "c.txt"] {
            let path = root.join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "kind: X\n").unwrap();
        }
        let got = sources(&[root.to_path_buf(), root.join("c.txt"), PathBuf::from("-")]).unwrap();
        let want = vec![
            Source::File(root.join("a/y.json")),
            Source::File(root.join("a/z.yml")),
            Source::File(root.join("b.yaml")),
            Source::File(root.join("c.txt")),
            Source::Stdin,
        ];
        assert_eq!(got, want);
        assert!(matches!(sources(&[PathBuf::from("-"), PathBuf::from("-")]), Err(ManifestError::StdinTwice)));
        let missing = sources(&[root.join("nope")]).unwrap_err().to_string();
        assert!(missing.contains("nope: cannot read"), "{missing}");
    }

    #[test]
    fn reads_files_with_the_size_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.yaml");
        fs::write(&path, "kind: A\n---\nkind: B\n").unwrap();
        let source = Source::File(path);
        assert_eq!(read_source(&source, &Limits::default()).unwrap().len(), 2);
        let tight = Limits { max_file_bytes: 10, ..Limits::default() };
        assert!(matches!(read_source(&source, &tight), Err(ManifestError::TooLarge { limit: 10, .. })));
    }
}

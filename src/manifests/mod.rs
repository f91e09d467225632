//! Kubernetes manifests from files, directories, stdin and git: multi-document YAML, JSON and
//! `kind: List`, each document with the file and line it came from. Shared by `validate`,
//! `review --state` and `plan --snapshot`.
//!
//! The reader is built for untrusted input (a pull request): files are capped in size, and the
//! YAML parser's budgets cap nesting depth and alias expansion, so a crafted file fails with a
//! clear error instead of exhausting memory.

mod git;
mod parse;
mod walk;

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub(crate) use git::{GitBlob, GitError, RawFile, Revision, RevisionFiles};
pub use parse::{Format, parse};
pub(crate) use walk::read_source;
pub use walk::{Source, sources};

/// Bounds on what one input file may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file (or stdin, or git blob) read, in bytes.
    pub(crate) max_file_bytes: u64,
    /// Deepest nesting of mappings and sequences in a document.
    pub max_depth: usize,
    /// Most nodes replayed through YAML aliases in one file (stops "billion laughs").
    pub(crate) max_alias_replays: usize,
}

impl Limits {
    pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: Self::DEFAULT_MAX_FILE_BYTES,
            // serde_json's own recursion limit, so YAML and JSON agree.
            max_depth: 128,
            // Far above what hand-written manifests use, far below what blows up memory.
            max_alias_replays: 100_000,
        }
    }
}

/// One Kubernetes object read from a manifest. Items of a `kind: List` are documents of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The file path as given (or found in a directory), `-` for stdin, `REV:path` for git.
    pub source: String,
    /// 1-based line where the object starts (for JSON list items: the line of the list).
    pub line: usize,
    pub value: Value,
}

impl Document {
    pub fn api_version(&self) -> &str {
        self.value.get("apiVersion").and_then(Value::as_str).unwrap_or("")
    }

    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// The API group of `apiVersion` (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version().rsplit_once('/').map_or("", |(g, _)| g)
    }

    pub fn name(&self) -> Option<&str> {
        self.metadata_str("name")
    }

    pub fn namespace(&self) -> Option<&str> {
        self.metadata_str("namespace").filter(|ns| !ns.is_empty())
    }

    fn metadata_str(&self, key: &str) -> Option<&str> {
        self.value.get("metadata")?.get(key)?.as_str()
    }
}

/// Why a manifest could not be read. Each names the file, and the line and column when known.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{source_name}: cannot read: {error}")]
    Io {
        source_name: String,
        #[source]
        error: io::Error,
    },
    #[error("{source_name}: file is larger than the limit of {limit} bytes (--max-file-bytes)")]
    TooLarge { source_name: String, limit: u64 },
    #[error("{source_name}: binary data, not YAML or JSON (NUL byte at offset {offset})")]
    Binary { source_name: String, offset: usize },
    #[error("{source_name}:{line}:{column}: not UTF-8 text")]
    NotUtf8 { source_name: String, line: usize, column: usize },
    /// `message` starts with what went wrong: `YAML syntax error: …`, a nesting or alias limit.
    #[error("{source_name}:{line}:{column}: {message}")]
    Yaml { source_name: String, line: usize, column: usize, message: String },
    #[error("{source_name}:{line}:{column}: JSON syntax error: {message}")]
    Json { source_name: String, line: usize, column: usize, message: String },
    #[error("{source_name}:{line}: nesting deeper than {limit} levels")]
    TooDeep { source_name: String, line: usize, limit: usize },
    #[error("stdin (-) given more than once")]
    StdinTwice,
    #[error(transparent)]
    Git(#[from] GitError),
}

impl ManifestError {
    /// The file the error is about, when there is one (`pub`: the fuzz target checks it).
    pub fn source_name(&self) -> Option<&str> {
        match self {
            ManifestError::Io { source_name, .. }
            | ManifestError::TooLarge { source_name, .. }
            | ManifestError::Binary { source_name, .. }
            | ManifestError::NotUtf8 { source_name, .. }
            | ManifestError::Yaml { source_name, .. }
            | ManifestError::Json { source_name, .. }
            | ManifestError::TooDeep { source_name, .. } => Some(source_name),
            ManifestError::StdinTwice | ManifestError::Git(_) => None,
        }
    }

    /// 1-based line and column, when known.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            ManifestError::NotUtf8 { line, column, .. }
            | ManifestError::Yaml { line, column, .. }
            | ManifestError::Json { line, column, .. } => Some((*line, *column)),
            ManifestError::TooDeep { line, .. } => Some((*line, 1)),
            _ => None,
        }
        .filter(|(line, _)| *line > 0)
    }

    pub(crate) fn io(source_name: impl Into<String>, error: io::Error) -> Self {
        ManifestError::Io { source_name: source_name.into(), error }
    }
}

/// Reads every document under `paths` (files, directories walked for `*.yaml`, `*.yml`,
/// `*.json`, or `-` for stdin), in order; stops at the first file that cannot be read. For
/// large trees prefer [`sources`] + [`read_source`], which hold one file at a time.
pub fn read_documents(paths: &[PathBuf], limits: &Limits) -> Result<Vec<Document>, ManifestError> {
    let mut documents = Vec::new();
    for source in sources(paths)? {
        documents.extend(read_source(&source, limits)?);
    }
    Ok(documents)
}

/// `true` for the extensions a directory walk picks up.
pub fn is_manifest_path(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

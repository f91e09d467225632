//! The same paths at a git revision, read in one pass: one `git ls-tree` lists the blobs, one
//! `git cat-file --batch` streams them. Two processes whatever the number of files.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;

use super::parse::{Format, parse};
use super::{Document, Limits, ManifestError, is_manifest_path};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {0} (is git installed and on PATH?)")]
    Spawn(#[source] io::Error),
    #[error(
        "git revision {rev:?} not found{shallow}: fetch the history first (GitHub Actions: \
         actions/checkout with fetch-depth: 0; GitLab CI: GIT_DEPTH: 0; or {fetch})"
    )]
    RevisionNotFound { rev: String, shallow: &'static str, fetch: String },
    #[error("invalid git revision {0:?}")]
    BadRevision(String),
    #[error("`git {command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("unexpected output from `git cat-file --batch`: {0}")]
    Protocol(String),
}

/// The command that makes `rev` exist: a remote-tracking ref (`origin/main`) needs its branch
/// fetched into that very ref (`git fetch origin origin/main` names no branch of the remote).
fn fetch_command(rev: &str) -> String {
    let rev = rev.strip_prefix("refs/remotes/").unwrap_or(rev);
    match rev.split_once('/') {
        Some((remote, branch)) if !remote.is_empty() && !branch.is_empty() && !remote.contains(['~', '^', ':']) => {
            format!("git fetch {remote} {branch}:refs/remotes/{remote}/{branch}")
        }
        _ => format!("git fetch origin {rev}"),
    }
}

/// A resolved git revision of the repository in a directory.
#[derive(Debug, Clone)]
pub(crate) struct Revision {
    cwd: PathBuf,
    rev: String,
    tree: String,
}

/// A file listed at a revision: its object id and its path relative to the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitBlob {
    oid: String,
    pub path: String,
}

impl Revision {
    /// `rev` in the repository of the current directory.
    pub(crate) fn resolve(rev: &str) -> Result<Revision, ManifestError> {
        let cwd = std::env::current_dir().map_err(|e| ManifestError::io(".", e))?;
        Self::resolve_in(&cwd, rev)
    }

    pub(crate) fn resolve_in(cwd: &Path, rev: &str) -> Result<Revision, ManifestError> {
        let tree = Git { cwd }.resolve_tree(rev)?;
        Ok(Revision { cwd: cwd.to_path_buf(), rev: rev.to_string(), tree })
    }

    /// The manifest files `paths` held (same rules as the directory walk), in git's path order.
    pub(crate) fn list(&self, paths: &[PathBuf]) -> Result<Vec<GitBlob>, ManifestError> {
        let specs: Vec<String> = paths.iter().filter(|p| p.as_os_str() != "-").map(|p| self.path_of(p)).collect();
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(Git { cwd: &self.cwd }.list_blobs(&self.tree, &specs)?)
    }

    /// A path as [`GitBlob::path`] spells it (relative to the directory, no `./`), to pair files
    /// on disk with files at the revision.
    pub(crate) fn path_of(&self, path: &Path) -> String {
        normalize(&self.cwd, path)
    }

    /// Streams `blobs`, in the order given, from one `git cat-file --batch`.
    pub(crate) fn read(&self, blobs: Vec<GitBlob>, limits: &Limits) -> Result<RevisionFiles, ManifestError> {
        let batch = if blobs.is_empty() { None } else { Some(Git { cwd: &self.cwd }.cat_file_batch(&blobs)?) };
        Ok(RevisionFiles {
            rev: self.rev.clone(),
            max_file_bytes: limits.max_file_bytes,
            blobs: blobs.into_iter(),
            batch,
        })
    }
}

/// One file read from git, not parsed yet.
#[derive(Debug)]
pub(crate) struct RawFile {
    /// `REV:path`.
    pub name: String,
    pub path: String,
    pub(crate) bytes: Vec<u8>,
}

impl RawFile {
    pub(crate) fn parse(&self, limits: &Limits) -> Result<Vec<Document>, ManifestError> {
        parse(&self.name, &self.bytes, Format::of_path(Path::new(&self.path)), limits)
    }
}

/// Iterator over the files of [`Revision::read`], in path order.
pub(crate) struct RevisionFiles {
    rev: String,
    max_file_bytes: u64,
    blobs: std::vec::IntoIter<GitBlob>,
    batch: Option<Batch>,
}

/// The running `git cat-file --batch` and the thread feeding it object ids.
struct Batch {
    child: Child,
    reader: BufReader<ChildStdout>,
    writer: Option<JoinHandle<io::Result<()>>>,
}

impl Iterator for RevisionFiles {
    type Item = Result<RawFile, ManifestError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.batch.as_mut()?;
        let Some(GitBlob { oid, path }) = self.blobs.next() else {
            // All read: the process must have ended well.
            let batch = self.batch.take()?;
            return batch.finish().err().map(Err);
        };
        let name = format!("{}:{path}", self.rev);
        let item = read_blob(&mut batch.reader, &oid, &name, self.max_file_bytes);
        match item {
            Ok(Some(bytes)) => Some(Ok(RawFile { name, path, bytes })),
            Ok(None) => Some(Err(ManifestError::TooLarge { source_name: name, limit: self.max_file_bytes })),
            Err(e) => {
                // The stream is out of step: stop here.
                self.blobs = Vec::new().into_iter();
                if let Some(batch) = self.batch.take() {
                    batch.kill();
                }
                Some(Err(e))
            }
        }
    }
}

impl Drop for RevisionFiles {
    fn drop(&mut self) {
        if let Some(batch) = self.batch.take() {
            batch.kill();
        }
    }
}

/// One `<oid> blob <size>\n<content>\n` record; None (content skipped, not held) when over `limit`.
fn read_blob(reader: &mut impl BufRead, oid: &str, name: &str, limit: u64) -> Result<Option<Vec<u8>>, ManifestError> {
    let mut header = String::new();
    reader.read_line(&mut header).map_err(|e| ManifestError::io(name, e))?;
    let size = parse_header(&header, oid)?;
    if size > limit {
        io::copy(&mut reader.take(size + 1), &mut io::sink()).map_err(|e| ManifestError::io(name, e))?;
        return Ok(None);
    }
    let mut content = vec![0; size as usize + 1];
    reader.read_exact(&mut content).map_err(|e| ManifestError::io(name, e))?;
    content.pop();
    Ok(Some(content))
}

impl Batch {
    fn finish(mut self) -> Result<(), ManifestError> {
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        let status = self.child.wait().map_err(|e| ManifestError::io("git cat-file", e))?;
        if status.success() {
            return Ok(());
        }
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut stderr);
        }
        Err(GitError::Failed { command: "cat-file --batch".to_string(), stderr: stderr.trim().to_string() }.into())
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

struct Git<'a> {
    cwd: &'a Path,
}

impl Git<'_> {
    fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        // Paths come back as bytes, not quoted.
        cmd.args(["-c", "core.quotePath=false"]).current_dir(self.cwd);
        cmd
    }

    fn run(&self, args: &[&str]) -> Result<std::process::Output, GitError> {
        self.command().args(args).stdin(Stdio::null()).output().map_err(GitError::Spawn)
    }

    fn resolve_tree(&self, rev: &str) -> Result<String, GitError> {
        if rev.is_empty() || rev.starts_with('-') {
            return Err(GitError::BadRevision(rev.to_string()));
        }
        let out = self.run(&["rev-parse", "--verify", "--quiet", &format!("{rev}^{{tree}}")])?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
        }
        // Not found: say whether a shallow clone is the likely reason, or report git's own error
        // (e.g. not a git repository).
        let shallow = self.run(&["rev-parse", "--is-shallow-repository"])?;
        if !shallow.status.success() {
            return Err(GitError::Failed {
                command: "rev-parse".to_string(),
                stderr: String::from_utf8_lossy(&shallow.stderr).trim().to_string(),
            });
        }
        let is_shallow = String::from_utf8_lossy(&shallow.stdout).trim() == "true";
        Err(GitError::RevisionNotFound {
            rev: rev.to_string(),
            shallow: if is_shallow { " (this is a shallow clone)" } else { "" },
            fetch: fetch_command(rev),
        })
    }

    /// `git ls-tree -r -z TREE -- SPECS`: regular blobs only (no symlinks, no submodules).
    fn list_blobs(&self, tree: &str, specs: &[String]) -> Result<Vec<GitBlob>, GitError> {
        let mut args: Vec<&str> = vec!["ls-tree", "-r", "-z", tree, "--"];
        // An empty spec is the current directory.
        args.extend(specs.iter().map(|s| if s.is_empty() { "." } else { s.as_str() }));
        let out = self.run(&args)?;
        if !out.status.success() {
            return Err(GitError::Failed {
                command: "ls-tree".to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let mut blobs = Vec::new();
        for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            let Some((meta, path)) = entry.split_once('\t') else { continue };
            let mut fields = meta.split(' ');
            let (mode, kind, oid) = (fields.next(), fields.next(), fields.next());
            if kind != Some("blob") || mode == Some("120000") {
                continue;
            }
            let (Some(oid), true) = (oid, selected(path, specs)) else { continue };
            blobs.push(GitBlob { oid: oid.to_string(), path: path.to_string() });
        }
        Ok(blobs)
    }

    /// Starts one `git cat-file --batch` for all blobs; a writer thread feeds the object ids so
    /// neither pipe fills up while the other waits.
    fn cat_file_batch(&self, blobs: &[GitBlob]) -> Result<Batch, GitError> {
        let mut child = self
            .command()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(GitError::Spawn)?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(GitError::Protocol("no pipes to git cat-file".to_string()));
        };
        let ids: String = blobs.iter().map(|b| format!("{}\n", b.oid)).collect();
        let writer = std::thread::spawn(move || stdin.write_all(ids.as_bytes()));
        Ok(Batch { child, reader: BufReader::with_capacity(256 * 1024, stdout), writer: Some(writer) })
    }
}

/// A path argument as git prints paths: relative to `cwd`, no `./`.
fn normalize(cwd: &Path, path: &Path) -> String {
    let path = path.strip_prefix(cwd).unwrap_or(path);
    let mut s = path.to_string_lossy().replace('\\', "/");
    while let Some(rest) = s.strip_prefix("./") {
        s = rest.to_string();
    }
    let s = s.trim_end_matches('/');
    if s == "." { String::new() } else { s.to_string() }
}

/// Whether a listed path would be picked by the same arguments on disk: the argument itself, or
/// a manifest file below it with no hidden component in between.
fn selected(path: &str, specs: &[String]) -> bool {
    specs.iter().any(|spec| {
        if path == spec {
            return true;
        }
        let rest = if spec.is_empty() {
            path
        } else {
            match path.strip_prefix(spec.as_str()).and_then(|r| r.strip_prefix('/')) {
                Some(rest) => rest,
                None => return false,
            }
        };
        !rest.split('/').any(|c| c.starts_with('.')) && is_manifest_path(Path::new(rest))
    })
}

/// `<oid> blob <size>\n`.
fn parse_header(header: &str, oid: &str) -> Result<u64, GitError> {
    let mut fields = header.trim_end().split(' ');
    match (fields.next(), fields.next(), fields.next()) {
        (Some(got), Some("blob"), Some(size)) if got == oid => {
            size.parse().map_err(|_| GitError::Protocol(header.trim_end().to_string()))
        }
        _ => Err(GitError::Protocol(header.trim_end().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_advice_names_a_ref_that_will_exist() {
        let cases = [
            ("origin/main", "git fetch origin main:refs/remotes/origin/main"),
            ("refs/remotes/upstream/release/1.2", "git fetch upstream release/1.2:refs/remotes/upstream/release/1.2"),
            ("main", "git fetch origin main"),
            ("v1.0.0", "git fetch origin v1.0.0"),
        ];
        for (rev, want) in cases {
            assert_eq!(fetch_command(rev), want, "{rev}");
        }
    }

    #[test]
    fn selection_matches_the_directory_walk() {
        let specs = vec!["jobs".to_string(), "one.txt".to_string()];
        let cases = [
            ("jobs/a.yaml", true),
            ("jobs/sub/b.yml", true),
            ("jobs/c.json", true),
            ("jobs/readme.md", false),
            ("jobs/.hidden/d.yaml", false),
            ("jobsx/e.yaml", false),
            ("one.txt", true),
            ("other/f.yaml", false),
        ];
        for (path, want) in cases {
            assert_eq!(selected(path, &specs), want, "{path}");
        }
        assert!(selected("x/y.yaml", &[String::new()]));
        assert!(!selected(".github/w.yml", &[String::new()]));
    }

    #[test]
    fn normalizes_arguments_like_git_prints_paths() {
        let cases =
            [("./jobs/", "jobs"), (".", ""), ("./", ""), ("a/b.yaml", "a/b.yaml"), ("/repo/a/c.yaml", "a/c.yaml")];
        for (arg, want) in cases {
            assert_eq!(normalize(Path::new("/repo"), Path::new(arg)), want, "{arg}");
        }
    }

    #[test]
    fn rejects_revisions_that_look_like_options() {
        let git = Git { cwd: Path::new(".") };
        assert!(matches!(git.resolve_tree("--output=x"), Err(GitError::BadRevision(_))));
    }
}

#[cfg(test)]
mod repo_tests {
    use std::fs;

    use super::*;

    fn read_at_revision_in(
        cwd: &Path,
        rev: &str,
        paths: &[PathBuf],
        limits: &Limits,
        each: &mut dyn FnMut(Result<Vec<Document>, ManifestError>),
    ) -> Result<usize, ManifestError> {
        let mut files = 0;
        let revision = Revision::resolve_in(cwd, rev)?;
        for file in revision.read(revision.list(paths)?, limits)? {
            files += 1;
            each(file.and_then(|f| f.parse(limits)));
        }
        Ok(files)
    }

    fn sh(dir: &Path, args: &[&str]) {
        let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn write(dir: &Path, path: &str, text: &str) {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        sh(d, &["init", "-q", "-b", "main"]);
        sh(d, &["config", "user.email", "t@example.com"]);
        sh(d, &["config", "user.name", "t"]);
        write(d, "jobs/a.yaml", "kind: A\nmetadata: {name: a}\n---\nkind: B\nmetadata: {name: b}\n");
        write(d, "jobs/sub/c.json", "{\"kind\": \"C\", \"metadata\": {\"name\": \"c\"}}");
        write(d, "jobs/notes.md", "not read");
        write(d, "jobs/.hidden/h.yaml", "kind: H\n");
        write(d, "jobs/big.yaml", &format!("kind: Big\nx: {}\n", "y".repeat(200)));
        write(d, "jobs/bad.yaml", "a: b\n c: d\n");
        write(d, "other/o.yaml", "kind: O\n");
        sh(d, &["add", "-A"]);
        sh(d, &["commit", "-q", "-m", "base"]);
        dir
    }

    #[test]
    fn reads_the_same_paths_at_a_revision_in_one_pass() {
        let dir = repo();
        // The working tree moves on; the revision is what is read.
        write(dir.path(), "jobs/a.yaml", "kind: Changed\n");
        let limits = Limits { max_file_bytes: 100, ..Limits::default() };
        let mut docs = Vec::new();
        let mut errors = Vec::new();
        let files = read_at_revision_in(
            dir.path(),
            "HEAD",
            &[PathBuf::from("./jobs/"), PathBuf::from("-")],
            &limits,
            &mut |r| match r {
                Ok(d) => docs.extend(d.into_iter().map(|d| (d.source.clone(), d.line, d.kind().to_string()))),
                Err(e) => errors.push(e.to_string()),
            },
        )
        .unwrap();
        assert_eq!(files, 4);
        let want = vec![
            ("HEAD:jobs/a.yaml".to_string(), 1, "A".to_string()),
            ("HEAD:jobs/a.yaml".to_string(), 4, "B".to_string()),
            ("HEAD:jobs/sub/c.json".to_string(), 1, "C".to_string()),
        ];
        assert_eq!(docs, want);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("HEAD:jobs/bad.yaml:2:3: YAML syntax error"), "{errors:?}");
        assert!(errors[1].starts_with("HEAD:jobs/big.yaml: file is larger than the limit"), "{errors:?}");
    }

    #[test]
    fn a_missing_revision_says_to_fetch_the_history() {
        let dir = repo();
        let err =
            read_at_revision_in(dir.path(), "origin/main", &[PathBuf::from(".")], &Limits::default(), &mut |_| {})
                .unwrap_err()
                .to_string();
        assert!(err.contains("\"origin/main\" not found") && err.contains("fetch-depth: 0"), "{err}");
        assert!(err.contains("git fetch origin main:refs/remotes/origin/main"), "{err}");
        let outside = tempfile::tempdir().unwrap();
        let err = read_at_revision_in(outside.path(), "HEAD", &[PathBuf::from(".")], &Limits::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a git repository"), "{err}");
    }
}

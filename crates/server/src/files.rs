//! Per-worker cache of what a path under the root resolves to: the open file (so
//! `sendfile` needs no `open` per request), its validators and, for small files,
//! its bytes. Entries are re-checked with a fresh stat after `ttl`.
//!
//! Guarantees: nothing outside the root is ever returned. A path is served only if
//! its canonical form (all symlinks resolved) lies under the canonical root; a
//! directory is served through its `index.html`; anything but a regular file is 403.
//!
//! The calls here (`canonicalize`, `open`, `stat`, reading small files) run on the
//! event loop: they are fast on a local disk and happen once per path per `ttl`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sojourn_http::{content_type, Representation, Resolved};

/// A file ready to be served.
#[derive(Debug)]
pub struct CachedFile {
    pub file: File,
    pub representation: Representation,
    pub content_type: &'static str,
    /// The whole content when the file is at most `cache_file_max` bytes.
    pub bytes: Option<Arc<[u8]>>,
}

/// Why a path cannot be served, as a status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    NotFound,
    Forbidden,
    Internal,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::NotFound => 404,
            Refusal::Forbidden => 403,
            Refusal::Internal => 500,
        }
    }

    fn from_io(error: &io::Error) -> Refusal {
        match error.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory | io::ErrorKind::InvalidFilename => Refusal::NotFound,
            io::ErrorKind::PermissionDenied => Refusal::Forbidden,
            _ => Refusal::Internal,
        }
    }
}

type Lookup = Result<Arc<CachedFile>, Refusal>;

pub struct FileCache {
    root: PathBuf,
    ttl: Duration,
    cache_file_max: u64,
    entries: HashMap<(PathBuf, bool), (Instant, Lookup)>,
}

/// Entries kept before the cache is emptied (a crude bound on memory).
const MAX_ENTRIES: usize = 50_000;

impl FileCache {
    /// `root` must be canonical.
    pub fn new(root: PathBuf, ttl: Duration, cache_file_max: u64) -> Self {
        FileCache { root, ttl, cache_file_max, entries: HashMap::new() }
    }

    /// What `resolved` names under the root, as of at most `ttl` ago.
    pub fn lookup(&mut self, resolved: &Resolved, now: Instant) -> Lookup {
        let key = (resolved.relative.clone(), resolved.directory);
        if let Some((checked, result)) = self.entries.get(&key) {
            if now.duration_since(*checked) < self.ttl {
                return result.clone();
            }
        }
        let result = self.load(&resolved.relative, resolved.directory);
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        self.entries.insert(key, (now, result.clone()));
        result
    }

    fn load(&self, relative: &Path, directory: bool) -> Lookup {
        let canonical = self.root.join(relative).canonicalize().map_err(|e| Refusal::from_io(&e))?;
        // Symlinks must not lead out of the root.
        if !canonical.starts_with(&self.root) {
            return Err(Refusal::Forbidden);
        }
        let metadata = canonical.metadata().map_err(|e| Refusal::from_io(&e))?;
        let path = if metadata.is_dir() {
            let index = canonical.join("index.html").canonicalize().map_err(|e| Refusal::from_io(&e))?;
            if !index.starts_with(&self.root) {
                return Err(Refusal::Forbidden);
            }
            index
        } else if directory {
            return Err(Refusal::NotFound); // `/file.txt/` names no directory
        } else {
            canonical
        };
        let mut file = File::open(&path).map_err(|e| Refusal::from_io(&e))?;
        let metadata = file.metadata().map_err(|e| Refusal::from_io(&e))?;
        if !metadata.is_file() {
            return Err(Refusal::Forbidden);
        }
        let size = metadata.len();
        let modified = metadata.modified().map_err(|e| Refusal::from_io(&e))?;
        let bytes = if size <= self.cache_file_max {
            let mut content = Vec::with_capacity(size as usize);
            file.read_to_end(&mut content).map_err(|e| Refusal::from_io(&e))?;
            if content.len() as u64 != size {
                return Err(Refusal::Internal); // changed while read: try again next time
            }
            Some(Arc::from(content))
        } else {
            None
        };
        Ok(Arc::new(CachedFile { file, representation: Representation::new(size, modified), content_type: content_type(&path), bytes }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_http::resolve_target;

    #[test]
    fn refuses_what_leaves_the_root() {
        let base = std::env::temp_dir().join(format!("sjsrv-files-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("small.txt"), b"hello").unwrap();
        std::fs::write(root.join("sub/index.html"), b"<p>").unwrap();
        std::fs::write(base.join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink("small.txt", root.join("in")).unwrap();
        let mut cache = FileCache::new(root.canonicalize().unwrap(), Duration::from_secs(1), 4);
        let now = Instant::now();
        let mut get = |target: &str| cache.lookup(&resolve_target(target).unwrap(), now).map(|f| (f.representation.size, f.bytes.is_some()));
        assert_eq!(get("/small.txt"), Ok((5, false)), "5 bytes > cache_file_max 4");
        assert_eq!(get("/in"), Ok((5, false)), "a symlink inside the root is fine");
        assert_eq!(get("/sub/"), Ok((3, true)));
        assert_eq!(get("/sub"), Ok((3, true)));
        assert_eq!(get("/out"), Err(Refusal::Forbidden));
        assert_eq!(get("/nothing"), Err(Refusal::NotFound));
        assert_eq!(get("/small.txt/"), Err(Refusal::NotFound));
        assert_eq!(get("/"), Err(Refusal::NotFound), "no index.html at the root");
        std::fs::remove_dir_all(&base).unwrap();
    }
}

//! The `:` prompt's history: ↑ and ↓ walk the commands given before, in
//! this session and the ones before it (`$XDG_STATE_HOME/ankusa/history`,
//! else `~/.local/state/ankusa/history`).
//!
//! Invariants:
//! - At most [`MAX`] commands are kept, in memory and in the file (the file
//!   is rewritten whole, through a temporary file and a rename, so a crash
//!   leaves the old file or the new one). It is not synced: the write
//!   happens on the console's own thread when a command is given, and a
//!   history lost to a power cut costs nothing, while an fsync there could
//!   freeze the screen on a slow disk.
//! - A line that could hold a secret is never kept: the prompt takes no
//!   token, but a command naming `token`, `secret`, `bearer` or `whsec_` is
//!   left out, and guard confirmations are typed in the guard, never here.
//! - The file is the operator's own: its directory is made 0700 and the
//!   file 0600. A file that cannot be read or written costs the history
//!   only; the console works on without it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// Commands kept at most.
pub const MAX: usize = 1000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    entries: VecDeque<String>,
    /// Where ↑ has walked to (an index into `entries`), while walking.
    at: Option<usize>,
    /// What was typed before the walk began, given back past the newest.
    draft: String,
    file: Option<PathBuf>,
}

/// The history file for this user, from the environment.
pub fn default_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".local/state")
        }
    };
    Some(base.join("ankusa").join("history"))
}

/// Whether a command could carry a secret, and so is never kept.
fn secret_looking(cmd: &str) -> bool {
    let l = cmd.to_ascii_lowercase();
    ["token", "secret", "bearer", "whsec_", "password"]
        .iter()
        .any(|w| l.contains(w))
}

impl History {
    /// The history kept in `file` (its last [`MAX`] lines; none if it
    /// cannot be read), appended to as commands are given.
    pub fn load(file: PathBuf) -> History {
        let mut entries: VecDeque<String> = std::fs::read_to_string(&file)
            .map(|t| {
                t.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !secret_looking(l))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        while entries.len() > MAX {
            entries.pop_front();
        }
        History {
            entries,
            file: Some(file),
            ..History::default()
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A command given: kept (unless empty, a repeat of the last one, or
    /// secret-looking) and written to the file.
    pub fn push(&mut self, cmd: &str) {
        self.at = None;
        self.draft.clear();
        let cmd = cmd.trim();
        if cmd.is_empty() || secret_looking(cmd) || self.entries.back().is_some_and(|l| l == cmd) {
            return;
        }
        self.entries.push_back(cmd.to_owned());
        while self.entries.len() > MAX {
            self.entries.pop_front();
        }
        if let Some(f) = &self.file {
            // The history is a convenience: a write that fails loses it,
            // never the console.
            let _ = save(f, &self.entries);
        }
    }

    /// ↑ with `typed` on the line: the command before the one shown.
    pub fn older(&mut self, typed: &str) -> Option<String> {
        let i = match self.at {
            None => {
                self.draft = typed.to_owned();
                self.entries.len().checked_sub(1)?
            }
            Some(i) => i.checked_sub(1)?,
        };
        self.at = Some(i);
        self.entries.get(i).cloned()
    }

    /// ↓: the command after the one shown, and past the newest what was
    /// typed before the walk.
    pub fn newer(&mut self) -> Option<String> {
        let i = self.at?;
        if i + 1 < self.entries.len() {
            self.at = Some(i + 1);
            return self.entries.get(i + 1).cloned();
        }
        self.at = None;
        Some(std::mem::take(&mut self.draft))
    }

    /// The prompt closed: the next ↑ starts from the newest again.
    pub fn reset(&mut self) {
        self.at = None;
        self.draft.clear();
    }
}

/// Writes the file whole: a temporary file of its own beside it (0600, a
/// name no other console shares: two consoles open at once wrote one
/// `history.tmp`, and one's rename could publish the other's half-written
/// file or fail), then a rename over the old one.
fn save(file: &Path, entries: &VecDeque<String>) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(".history.")
        .tempfile_in(dir)?;
    let mut f = std::io::BufWriter::new(tmp);
    for e in entries {
        writeln!(f, "{e}")?;
    }
    let tmp = f
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 47: two consoles saving at once each write a whole file, and
    /// neither save fails.
    #[test]
    fn consoles_saving_at_once_do_not_share_a_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("history");
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let file = file.clone();
                std::thread::spawn(move || {
                    let entries: VecDeque<String> = (0..50)
                        .map(|i| format!("console {t} command {i}"))
                        .collect();
                    for _ in 0..100 {
                        save(&file, &entries).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 50);
        let who = lines[0].split(" command").next().unwrap();
        assert!(lines.iter().all(|l| l.starts_with(who)), "a mixed file");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn up_and_down_walk_the_commands_and_give_back_the_draft() {
        let mut h = History::default();
        for c in ["dlq acme", "sort dead", "sort dead", "  ", "sinks"] {
            h.push(c);
        }
        assert_eq!(h.len(), 3, "no empty line, no repeat");
        assert_eq!(h.older("so").as_deref(), Some("sinks"));
        assert_eq!(h.older("").as_deref(), Some("sort dead"));
        assert_eq!(h.older("").as_deref(), Some("dlq acme"));
        assert_eq!(h.older(""), None, "the oldest stays");
        assert_eq!(h.newer().as_deref(), Some("sort dead"));
        assert_eq!(h.newer().as_deref(), Some("sinks"));
        assert_eq!(h.newer().as_deref(), Some("so"), "the draft comes back");
        assert_eq!(h.newer(), None);
    }

    #[test]
    fn a_secret_looking_line_is_never_kept() {
        let mut h = History::default();
        h.push("policy weight=2");
        h.push("tenant token=abc");
        h.push("limit whsec_abcd");
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn the_file_keeps_the_last_thousand_private_to_its_user() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/ankusa/history");
        let mut h = History::load(path.clone());
        assert!(h.is_empty(), "no file yet");
        for i in 0..(MAX + 5) {
            h.push(&format!("dlq t{i}"));
        }
        let again = History::load(path.clone());
        assert_eq!(again.len(), MAX);
        assert_eq!(again.entries.front().map(String::as_str), Some("dlq t5"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dmode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
        // A secret written by hand into the file is not offered back.
        std::fs::write(&path, "sinks\nfoo token=x\n").unwrap();
        assert_eq!(History::load(path).len(), 1);
    }
}

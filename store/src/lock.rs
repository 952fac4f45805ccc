//! Who holds a store: RocksDB's primary takes a POSIX record lock on the
//! `LOCK` file; `F_GETLK` reports the holder without taking anything. The
//! console uses it to choose between following a running daemon and opening
//! read-only, and the CLI to refuse exclusive work on a store a daemon holds.
//!
//! POSIX record locks are per process: a lock held by *this* process is not
//! reported. Callers that open the primary themselves already know.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;

use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;

use crate::error::{Result, StoreError};

/// The pid of the process holding the store at `path` as its primary, if any.
pub fn holder(path: &Path) -> Result<Option<i32>> {
    let lock = path.join("LOCK");
    let file = match OpenOptions::new().read(true).write(true).open(&lock) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StoreError::Io { path: lock, source }),
    };
    let mut fl = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    fcntl(file.as_raw_fd(), FcntlArg::F_GETLK(&mut fl)).map_err(|e| StoreError::Io {
        path: lock,
        source: std::io::Error::from(e),
    })?;
    if fl.l_type == libc::F_UNLCK as libc::c_short {
        Ok(None)
    } else {
        Ok(Some(fl.l_pid))
    }
}

//! The console's one error type, [`ConsoleError`]: what `ankusa console`
//! and `ankusa bench console` return. Each variant says what the console
//! was doing; the cause (a store error, an operator error, the terminal's
//! I/O error) stays attached as its `source`, so the binary's report
//! (color-eyre) prints the whole chain and the fix the store's error names.

use std::io;
use std::path::PathBuf;

use ankusa_store::StoreError;

use crate::data::{DataError, OpenError};

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The store could not be opened; nothing was shown yet.
    #[error("cannot open the console on {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: OpenError,
    },
    #[error(
        "stdout is not a terminal: `ankusa console` is interactive (run it over `ssh -t` or in tmux). \
         For scripts use `ankusa tenants list --json` or `ankusa store info --json`."
    )]
    NotATerminal,
    /// A terminal step failed (raw mode, the alternate screen, a draw,
    /// reading a key).
    #[error("{what}")]
    Terminal {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// The worker thread that answers the screens' requests is gone.
    #[error("the console's data thread stopped")]
    FeedStopped,
    /// A request the bench sent the feed failed.
    #[error("the request {request} failed")]
    Request {
        request: String,
        #[source]
        source: DataError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file or directory the bench keeps its fixtures in.
    #[error("{what} {path}")]
    File {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The bench's fixture marker is not what the bench wrote.
    #[error("{0}: not a console bench fixture marker; remove the directory to rebuild it")]
    Marker(PathBuf),
    /// The store needs migrating: the bench measures format 3 stores.
    #[error("{0}: the store is not open (it needs migrating)")]
    NotOpen(PathBuf),
    #[error("the console's first frame showed no overview")]
    NoFirstFrame,
}

impl ConsoleError {
    /// Wraps a terminal I/O error with what the console was doing.
    pub(crate) fn terminal(what: &'static str) -> impl FnOnce(io::Error) -> ConsoleError {
        move |source| ConsoleError::Terminal { what, source }
    }
}

//! The worker thread that runs the feed, so a slow store never blocks
//! input: fetches in, events (progress, replies) out, in order.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::feed::Feed;
use super::request::{Progress, Reply, Request};

/// A request sent to the worker, tagged so replies can be matched.
#[derive(Debug)]
pub struct Fetch {
    pub id: u64,
    pub req: Request,
    pub now: u64,
}

/// What the worker sends back.
// An event is moved once through a channel; boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event {
    Reply {
        id: u64,
        req: Request,
        result: Result<Reply, String>,
        took: Duration,
    },
    Progress {
        id: u64,
        progress: Progress,
    },
}

/// Runs the feed on its own thread: fetches in, events out. The thread
/// ends when the fetch sender is dropped.
pub fn spawn_worker(
    mut src: Feed,
    dispatch: tracing::Dispatch,
) -> std::io::Result<(
    mpsc::Sender<Fetch>,
    mpsc::Receiver<Event>,
    std::thread::JoinHandle<()>,
)> {
    let (ftx, frx) = mpsc::channel::<Fetch>();
    let (etx, erx) = mpsc::channel::<Event>();
    let handle = std::thread::Builder::new()
        .name("ankusa-console-data".into())
        .spawn(move || {
            let _guard = tracing::dispatcher::set_default(&dispatch);
            for fetch in frx {
                let t0 = Instant::now();
                let id = fetch.id;
                let tx = etx.clone();
                let mut progress = |p: Progress| {
                    let _ = tx.send(Event::Progress { id, progress: p });
                };
                let result = src.execute(&fetch.req, fetch.now, &mut progress).map_err(|e| {
                    tracing::warn!(target: "console", "{e}");
                    e.to_string()
                });
                if let Ok(Reply::Done(r)) = &result {
                    tracing::info!(target: "console", "{}: {} of {} rows", r.scope.describe(), r.touched, r.expected);
                }
                let ev = Event::Reply {
                    id,
                    req: fetch.req,
                    result,
                    took: t0.elapsed(),
                };
                if etx.send(ev).is_err() {
                    break;
                }
            }
        })?;
    Ok((ftx, erx, handle))
}

//! The console's screens, one module each: a screen owns its state, the
//! requests that refresh it, how its replies and keys change it, and how it
//! is drawn. A screen knows nothing of the other screens or of the app
//! around it: what it needs from the app (the clock, the rows that fit)
//! comes in as arguments, and what it wants done (fetch, open a screen,
//! start a guarded action) goes back as a [`Next`], which
//! [`crate::app::App`] carries out. So every change stays a pure function
//! of the state, and a change to one screen stays in its file.

pub mod actions;
pub mod dead_detail;
pub mod dlq;
pub mod heatmap;
pub mod log;
pub mod migration;
pub mod overview;
pub mod pages;
pub mod sinks;
pub mod tenant;
pub mod tenants;
pub mod trends;

use ankusa_store::rows::DeadRow;

use crate::data::{ActionScope, Request, SinkRef};
use crate::keymap::Tab;

/// Width of the name column on the heatmap and lists.
pub const NAME_COL: usize = 18;

/// A screen on the navigation stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    Overview,
    Tenants,
    Tenant {
        ord: u32,
    },
    Heatmap,
    Dlq {
        ord: Option<u32>,
        name: Option<String>,
    },
    DeadDetail {
        row: DeadRow,
    },
    Migration,
    Log,
    Sinks,
    Sink {
        sink: SinkRef,
    },
    /// What this console did (`8`, `:actions`); shown under the log's tab.
    Actions,
}

impl Screen {
    pub fn tab(&self) -> Tab {
        match self {
            Screen::Overview => Tab::Overview,
            Screen::Tenants | Screen::Tenant { .. } => Tab::Tenants,
            Screen::Heatmap => Tab::Heatmap,
            Screen::Dlq { .. } | Screen::DeadDetail { .. } => Tab::Dlq,
            Screen::Migration => Tab::Migration,
            Screen::Log | Screen::Actions => Tab::Log,
            Screen::Sinks | Screen::Sink { .. } => Tab::Sinks,
        }
    }

    pub fn of_tab(t: Tab) -> Screen {
        match t {
            Tab::Overview => Screen::Overview,
            Tab::Tenants => Screen::Tenants,
            Tab::Heatmap => Screen::Heatmap,
            Tab::Dlq => Screen::Dlq {
                ord: None,
                name: None,
            },
            Tab::Migration => Screen::Migration,
            Tab::Log => Screen::Log,
            Tab::Sinks => Screen::Sinks,
        }
    }
}

/// What a screen asks the app to do after a key or a reply changed it.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing more (the state change, if any, is all).
    Stay,
    /// Fetch the current screen's data again (its page or zoom changed).
    Reload,
    /// Open another screen on top of this one.
    Push(Screen),
    Fetch(Vec<Request>),
    /// Open the guard of an action with this scope (its dry run first).
    Guard(ActionScope),
}

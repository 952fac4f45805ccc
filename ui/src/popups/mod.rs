//! The popups drawn over a screen, one module each: the help overlay, the
//! text input line (`/` filter, `:` command) and the guard of a
//! destructive action. Each owns its state, its keys and its drawing; the
//! app keeps them on a stack (top is last) and sends keys to the top one.

pub mod guard;
pub mod help;
pub mod input;

/// The popup stack's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    /// The help overlay, scrolled down by this many lines.
    Help(u16),
    Input {
        kind: input::InputKind,
        text: String,
    },
    /// Boxed: a guard holds its whole scope, many times the other entries.
    Guard(Box<guard::Guard>),
}

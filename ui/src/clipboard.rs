//! Copying to the operator's clipboard with OSC 52: the terminal (or tmux
//! with `set -g set-clipboard on`, or a terminal at the far end of an SSH
//! session) puts the text on its clipboard. Nothing is read back, so a
//! terminal that ignores the sequence only means nothing was copied; the
//! footer says what was sent.

use base64::Engine as _;

/// Ids copied at most (a hook id is 30 bytes; a tenant 128): a terminal
/// refuses long sequences, and nothing the console copies is longer.
pub const MAX: usize = 512;

/// The OSC 52 sequence that puts `text` on the clipboard (`c`), BEL
/// terminated (what tmux and most terminals take). `None` for text that
/// is empty, too long, or holds a control character.
pub fn osc52(text: &str) -> Option<String> {
    if text.is_empty() || text.len() > MAX || text.chars().any(char::is_control) {
        return None;
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    Some(format!("\x1b]52;c;{b64}\x07"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_carries_the_text_in_base64() {
        assert_eq!(
            osc52("hk_eu-1_000000000000002a").as_deref(),
            Some("\x1b]52;c;aGtfZXUtMV8wMDAwMDAwMDAwMDAwMDJh\x07")
        );
        assert_eq!(osc52(""), None);
        assert_eq!(
            osc52("a\x1bb"),
            None,
            "no escape smuggled into the terminal"
        );
        assert_eq!(osc52(&"x".repeat(MAX + 1)), None);
    }
}

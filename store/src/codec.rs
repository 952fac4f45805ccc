//! Fixed-width big-endian primitives and a bounds-checked reader.
//!
//! Every key and value codec in the crate is built from these, so one place
//! decides what "too short" means and nothing indexes a slice unchecked.

use crate::error::DecodeError;

/// A cursor over bytes that returns [`DecodeError`] instead of panicking.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }

    fn err(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::new(self.what, reason)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                self.err(format!(
                    "needs {n} more bytes at offset {}, has {}",
                    self.pos,
                    self.buf.len().saturating_sub(self.pos)
                ))
            })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn expect_u8(&mut self, want: u8) -> Result<(), DecodeError> {
        let got = self.u8()?;
        if got == want {
            Ok(())
        } else {
            Err(self.err(format!("expected byte {want:#04x}, found {got:#04x}")))
        }
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// A byte string prefixed by its u16 length.
    pub fn bytes16(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u16()? as usize;
        self.take(n)
    }

    /// A byte string prefixed by its u32 length.
    pub fn bytes32(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// UTF-8 text prefixed by its u16 length.
    pub fn str16(&mut self) -> Result<String, DecodeError> {
        let b = self.bytes16()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| self.err("text is not UTF-8"))
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// Fails unless every byte was consumed: trailing garbage is corruption,
    /// not something to ignore.
    /// Whether every byte was read (an optional trailing field is absent).
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn finish(self) -> Result<(), DecodeError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(self.err(format!("{} trailing bytes", self.buf.len() - self.pos)))
        }
    }
}

/// Appends length-prefixed text; text longer than a u16 is cut at a char
/// boundary because every such field (ids, header names) is bounded upstream.
pub fn put_str16(out: &mut Vec<u8>, s: &str) {
    put_bytes16(out, truncate_utf8(s, u16::MAX as usize).as_bytes());
}

pub fn put_bytes16(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len().min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_be_bytes());
    out.extend_from_slice(&b[..n]);
}

pub fn put_bytes32(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len().min(u32::MAX as usize);
    out.extend_from_slice(&(n as u32).to_be_bytes());
    out.extend_from_slice(&b[..n]);
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

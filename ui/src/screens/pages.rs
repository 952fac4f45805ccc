//! Cursor paging for the lists read a page at a time from a cursor (the
//! tenants in ordinal or name order, the DLQ): where the shown page starts
//! and where each page before it started, so PgUp retraces PgDn exactly
//! without ever reading backwards.

#[derive(Debug, Clone, PartialEq)]
pub struct Pages<C> {
    /// Where the shown page starts; None: the first page.
    pub at: Option<C>,
    /// Where each page before it started, the first page first.
    pub back: Vec<Option<C>>,
}

impl<C> Default for Pages<C> {
    fn default() -> Self {
        Pages {
            at: None,
            back: Vec::new(),
        }
    }
}

impl<C> Pages<C> {
    /// The shown page's number, from 1.
    pub fn number(&self) -> usize {
        self.back.len() + 1
    }

    /// PgDn: the page starting at `next`.
    pub fn forward(&mut self, next: C) {
        self.back.push(self.at.take());
        self.at = Some(next);
    }

    /// PgUp: the page before; false on the first page.
    pub fn backward(&mut self) -> bool {
        match self.back.pop() {
            Some(prev) => {
                self.at = prev;
                true
            }
            None => false,
        }
    }

    /// Back to the first page; whether that moved.
    pub fn first(&mut self) -> bool {
        let moved = self.at.is_some();
        self.reset();
        moved
    }

    /// The first page, without saying whether it moved (the list changed).
    pub fn reset(&mut self) {
        self.at = None;
        self.back.clear();
    }
}

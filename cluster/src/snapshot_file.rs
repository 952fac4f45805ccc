//! A snapshot on disk and on the wire: the files of a store checkpoint in
//! one archive, so a member that lost its disk is sent one stream.
//!
//! Format (version 1): the magic `ANKSNAP1`, then for each file its name
//! (`len:u16`, UTF-8, a plain file name), its size (`u64`) and its bytes,
//! all big-endian; a name of length 0 ends the archive. A checkpoint is one
//! flat directory, so names carry no path: unpacking refuses a name with a
//! `/`, a `..` or a NUL, a truncated archive and anything after its end.
//!
//! Memory is one copy buffer, whatever the store's size.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

const MAGIC: &[u8; 8] = b"ANKSNAP1";
const BUF: usize = 1 << 20;

/// Packs the files of `dir` (flat: a subdirectory is refused) into `out`,
/// synced. Returns the archive's size.
pub fn pack(dir: &Path, out: &Path) -> io::Result<u64> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if !e.file_type()?.is_file() {
            return Err(io::Error::other(format!(
                "{} is not a plain file; a checkpoint is one flat directory",
                e.path().display()
            )));
        }
        names.push(
            e.file_name()
                .into_string()
                .map_err(|n| io::Error::other(format!("{n:?} is not a UTF-8 file name")))?,
        );
    }
    names.sort();
    let f = File::create(out)?;
    let mut w = BufWriter::with_capacity(BUF, f);
    w.write_all(MAGIC)?;
    for n in &names {
        let len = u16::try_from(n.len()).map_err(io::Error::other)?;
        let mut src = File::open(dir.join(n))?;
        let size = src.metadata()?.len();
        w.write_all(&len.to_be_bytes())?;
        w.write_all(n.as_bytes())?;
        w.write_all(&size.to_be_bytes())?;
        let copied = io::copy(&mut (&mut src).take(size), &mut w)?;
        if copied != size {
            return Err(io::Error::other(format!("{n} changed while it was packed")));
        }
    }
    w.write_all(&0u16.to_be_bytes())?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    f.metadata().map(|m| m.len())
}

/// Unpacks the archive read from `src` into the new directory `dir`, every
/// file and the directory synced.
pub fn unpack_from(src: impl Read, dir: &Path) -> io::Result<()> {
    let mut r = BufReader::with_capacity(BUF, src);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(io::Error::other("not an Ankusa snapshot (bad magic)"));
    }
    std::fs::create_dir(dir)?;
    loop {
        let mut len = [0u8; 2];
        r.read_exact(&mut len)?;
        let len = u16::from_be_bytes(len) as usize;
        if len == 0 {
            break;
        }
        let mut name = vec![0u8; len];
        r.read_exact(&mut name)?;
        let name = String::from_utf8(name).map_err(io::Error::other)?;
        if name.contains('/') || name.contains('\0') || name == "." || name == ".." {
            return Err(io::Error::other(format!("refusing the file name {name:?}")));
        }
        let mut size = [0u8; 8];
        r.read_exact(&mut size)?;
        let size = u64::from_be_bytes(size);
        let mut out = File::create_new(dir.join(&name))?;
        let copied = io::copy(&mut (&mut r).take(size), &mut out)?;
        if copied != size {
            return Err(io::Error::other(format!("the snapshot ends inside {name}")));
        }
        out.sync_all()?;
    }
    let mut rest = [0u8; 1];
    if r.read(&mut rest)? != 0 {
        return Err(io::Error::other("bytes after the snapshot's end"));
    }
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_packs_and_unpacks_to_the_same_files() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("CURRENT"), b"MANIFEST-1\n").unwrap();
        std::fs::write(src.join("000001.sst"), vec![7u8; 3 * BUF + 5]).unwrap();
        std::fs::write(src.join("empty"), b"").unwrap();
        let a = t.path().join("a.snap");
        pack(&src, &a).unwrap();
        let dst = t.path().join("dst");
        unpack_from(File::open(&a).unwrap(), &dst).unwrap();
        for n in ["CURRENT", "000001.sst", "empty"] {
            assert_eq!(
                std::fs::read(src.join(n)).unwrap(),
                std::fs::read(dst.join(n)).unwrap()
            );
        }
    }

    #[test]
    fn a_bad_archive_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("f"), b"0123456789").unwrap();
        let a = t.path().join("a.snap");
        pack(&src, &a).unwrap();
        let good = std::fs::read(&a).unwrap();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated", good[..good.len() - 4].to_vec()),
            ("trailing", [good.clone(), vec![1]].concat()),
            ("magic", [b"XXXXXXXX".to_vec(), good[8..].to_vec()].concat()),
            ("path", {
                let mut v = MAGIC.to_vec();
                v.extend_from_slice(&5u16.to_be_bytes());
                v.extend_from_slice(b"../ab");
                v.extend_from_slice(&0u64.to_be_bytes());
                v.extend_from_slice(&0u16.to_be_bytes());
                v
            }),
        ];
        for (i, (what, bytes)) in cases.into_iter().enumerate() {
            let p = t.path().join(format!("bad{i}"));
            std::fs::write(&p, bytes).unwrap();
            assert!(
                unpack_from(File::open(&p).unwrap(), &t.path().join(format!("out{i}"))).is_err(),
                "{what}"
            );
        }
    }
}

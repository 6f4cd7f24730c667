//! Reading UTF-16 text as UTF-8, incrementally.
//!
//! Small UTF-16 files are decoded whole ([`decode_utf16`]); a file over the
//! streaming threshold is read through [`Utf16Reader`], which transcodes as it reads so the
//! streaming chunker can cut lines and blocks exactly as it does for UTF-8. A code unit or a
//! surrogate pair split across reads is carried over; unpaired surrogates and a dangling odd
//! byte become U+FFFD.

use std::io::{self, Read};

/// A `Read` over UTF-16 bytes (after the byte-order mark) that yields UTF-8.
pub struct Utf16Reader<R> {
    inner: R,
    little_endian: bool,
    raw: Vec<u8>,
    /// An odd byte left from the last read.
    carry: Option<u8>,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
    out: Vec<u8>,
    pos: usize,
}

impl<R: Read> Utf16Reader<R> {
    /// Reads `inner` (positioned after the BOM) as UTF-16LE or BE.
    pub fn new(inner: R, little_endian: bool) -> Self {
        Self { inner, little_endian, raw: vec![0; 64 * 1024], carry: None, high: None, out: Vec::new(), pos: 0 }
    }

    fn push_char(&mut self, c: char) {
        let mut buf = [0u8; 4];
        self.out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }

    fn push_unit(&mut self, unit: u16) {
        if let Some(high) = self.high.take() {
            if (0xDC00..0xE000).contains(&unit) {
                let c = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                self.push_char(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                return;
            }
            self.push_char(char::REPLACEMENT_CHARACTER);
        }
        match unit {
            0xD800..=0xDBFF => self.high = Some(unit),
            0xDC00..=0xDFFF => self.push_char(char::REPLACEMENT_CHARACTER),
            _ => self.push_char(char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER)),
        }
    }

    /// Decodes the next read of `inner` into `out`; false at the end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        self.out.clear();
        self.pos = 0;
        let start = match self.carry.take() {
            Some(b) => {
                self.raw[0] = b;
                1
            }
            None => 0,
        };
        let n = self.inner.read(&mut self.raw[start..])?;
        if n == 0 {
            if start == 1 || self.high.take().is_some() {
                self.push_char(char::REPLACEMENT_CHARACTER);
            }
            return Ok(!self.out.is_empty());
        }
        let total = start + n;
        let even = total & !1;
        if even < total {
            self.carry = Some(self.raw[even]);
        }
        for i in (0..even).step_by(2) {
            let pair = [self.raw[i], self.raw[i + 1]];
            let unit = if self.little_endian { u16::from_le_bytes(pair) } else { u16::from_be_bytes(pair) };
            self.push_unit(unit);
        }
        Ok(true)
    }
}

impl<R: Read> Read for Utf16Reader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.out.len() {
            if !self.fill()? {
                return Ok(0);
            }
        }
        let k = buf.len().min(self.out.len() - self.pos);
        buf[..k].copy_from_slice(&self.out[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

/// UTF-16 text with a byte-order mark, decoded (unpaired surrogates become U+FFFD).
pub fn decode_utf16(bytes: &[u8]) -> Option<String> {
    let le = match bytes {
        [0xFF, 0xFE, ..] => true,
        [0xFE, 0xFF, ..] => false,
        _ => return None,
    };
    let units = bytes[2..].chunks_exact(2).map(|p| {
        if le {
            u16::from_le_bytes([p[0], p[1]])
        } else {
            u16::from_be_bytes([p[0], p[1]])
        }
    });
    Some(char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader returning at most `step` bytes per read, to split units and pairs.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let k = self.1.min(buf.len()).min(self.0.len());
            buf[..k].copy_from_slice(&self.0[..k]);
            self.0 = &self.0[k..];
            Ok(k)
        }
    }

    #[test]
    fn transcodes_across_split_units_and_surrogate_pairs() {
        let text = "héllo 𝄞 wörld\nline two ✓\n";
        for le in [true, false] {
            let bytes: Vec<u8> =
                text.encode_utf16().flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() }).collect();
            for step in [1, 3, 7, 1000] {
                let mut out = String::new();
                Utf16Reader::new(Trickle(&bytes, step), le).read_to_string(&mut out).unwrap();
                assert_eq!(out, text, "le={le} step={step}");
            }
        }
    }

    #[test]
    fn broken_input_becomes_replacement_characters() {
        // An unpaired low surrogate, an unpaired high surrogate before 'a', a dangling byte.
        let bytes = [0x00, 0xDC, 0x00, 0xD8, 0x61, 0x00, 0x62];
        let mut out = String::new();
        Utf16Reader::new(&bytes[..], true).read_to_string(&mut out).unwrap();
        assert_eq!(out, "\u{FFFD}\u{FFFD}a\u{FFFD}");
    }
}

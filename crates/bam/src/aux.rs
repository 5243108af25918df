//! Iterating the aux (optional) fields of a raw record (SAM spec §4.2.4).

/// Size in bytes of one value of a fixed-size aux type, or of a `B` array element.
pub fn type_size(t: u8) -> Option<usize> {
    match t {
        b'A' | b'c' | b'C' => Some(1),
        b's' | b'S' => Some(2),
        b'i' | b'I' | b'f' => Some(4),
        b'd' => Some(8),
        _ => None,
    }
}

/// One aux field: two-character tag, type, and value bytes.
#[derive(Clone, Copy, Debug)]
pub struct AuxField<'a> {
    /// The whole field: tag, type, value.
    pub raw: &'a [u8],
}

impl<'a> AuxField<'a> {
    /// The two-character tag.
    pub fn tag(&self) -> [u8; 2] {
        [self.raw[0], self.raw[1]]
    }
    /// The type character (`A c C s S i I f d Z H B`).
    pub fn value_type(&self) -> u8 {
        self.raw[2]
    }
    /// The value bytes (for `Z`/`H` without the NUL; for `B` including subtype and count).
    pub fn value(&self) -> &'a [u8] {
        match self.value_type() {
            b'Z' | b'H' => &self.raw[3..self.raw.len() - 1],
            _ => &self.raw[3..],
        }
    }
    /// An integer value of any integer type.
    pub fn integer(&self) -> Option<i64> {
        let v = &self.raw[3..];
        Some(match self.value_type() {
            b'c' => i64::from(v[0] as i8),
            b'C' => i64::from(v[0]),
            b's' => i64::from(i16::from_le_bytes([v[0], v[1]])),
            b'S' => i64::from(u16::from_le_bytes([v[0], v[1]])),
            b'i' => i64::from(i32::from_le_bytes([v[0], v[1], v[2], v[3]])),
            b'I' => i64::from(u32::from_le_bytes([v[0], v[1], v[2], v[3]])),
            _ => return None,
        })
    }
    /// For a `B:I` or `B:i` array, its element bytes.
    pub fn u32_array_bytes(&self) -> Option<&'a [u8]> {
        if self.value_type() != b'B' || !matches!(self.raw[3], b'I' | b'i') {
            return None;
        }
        Some(&self.raw[8..])
    }
}

/// Iterates aux fields; stops at the end or at the first malformed field.
pub struct AuxIter<'a> {
    rest: &'a [u8],
    error: bool,
}

impl<'a> AuxIter<'a> {
    /// Iterates the fields in `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            rest: bytes,
            error: false,
        }
    }
    /// After iteration: whether it stopped on a malformed field rather than at the end.
    pub fn error(&self) -> bool {
        self.error
    }
}

/// Length of the aux field at the start of `b`, or `None` if malformed.
pub fn field_len(b: &[u8]) -> Option<usize> {
    if b.len() < 3 {
        return None;
    }
    let n = match b[2] {
        b'Z' | b'H' => b[3..].iter().position(|&c| c == 0)? + 1,
        b'B' => {
            if b.len() < 8 {
                return None;
            }
            let size = type_size(b[3]).filter(|_| b[3] != b'A' && b[3] != b'd')?;
            let count = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
            5 + count.checked_mul(size)?
        }
        t => type_size(t)?,
    };
    let total = 3usize.checked_add(n)?;
    (total <= b.len()).then_some(total)
}

impl<'a> Iterator for AuxIter<'a> {
    type Item = AuxField<'a>;

    fn next(&mut self) -> Option<AuxField<'a>> {
        if self.rest.is_empty() || self.error {
            return None;
        }
        match field_len(self.rest) {
            Some(n) => {
                let (raw, rest) = self.rest.split_at(n);
                self.rest = rest;
                Some(AuxField { raw })
            }
            None => {
                self.error = true;
                None
            }
        }
    }
}

//! Combining the headers of files being merged, and translating their records, exactly as samtools
//! merge does (`bam_sort.c`: `trans_tbl_init`, `trans_rg_pg`, `finish_rg_pg`, `bam_translate`).
//!
//! The merged header holds `@HD` of the first file that has one, every `@SQ` name once (first seen
//! wins; records' reference ids are remapped), the `@RG` and `@PG` lines (an ID already taken gets a
//! `-XXXXXXXX` suffix from `lrand48`, unless combining), and the `@CO` lines. Other line types are
//! dropped, as samtools drops them.

use crate::aux::AuxIter;
use crate::{Header, Reference};
use std::collections::{HashMap, HashSet};

/// glibc's `drand48` family (samtools seeds it with `-s`, default the time): 48-bit LCG.
#[derive(Debug, Clone)]
pub struct Rand48(u64);

impl Rand48 {
    /// `srand48(seed)`.
    pub fn new(seed: i64) -> Self {
        Rand48((((seed as u64) & 0xffff_ffff) << 16) | 0x330e)
    }

    /// `lrand48()`: the next 31-bit value.
    pub fn next_value(&mut self) -> u64 {
        self.0 = (self.0.wrapping_mul(0x0005_deec_e66d).wrapping_add(0xb)) & ((1 << 48) - 1);
        self.0 >> 17
    }
}

/// Old `@RG`/`@PG` ID → new ID (`None`: records' tags with that ID are dropped).
pub type IdMap = HashMap<Vec<u8>, Option<Vec<u8>>>;

/// How one input's records map into the merged header.
#[derive(Debug, Default)]
pub struct Translation {
    /// New reference id of each of the input's references.
    pub tids: Vec<i32>,
    /// `@RG` ID → new ID (`None`: the tag is dropped).
    pub rg: IdMap,
    /// `@PG` ID → new ID.
    pub pg: IdMap,
    /// Whether the reference order of this input is not preserved (coordinate order lost).
    pub lost_coordinate_order: bool,
    /// `samtools merge -r`: the RG value attached to every record.
    pub attach_rg: Option<Vec<u8>>,
    /// Unknown RG IDs already reported.
    pub warned: std::sync::Mutex<HashSet<Vec<u8>>>,
    /// Warnings met while translating records (samtools' text), for the caller to report.
    pub warnings: std::sync::Mutex<Vec<String>>,
}

/// Appends `aux` without the byte spans `a` and `b` (the fields removed; either may be `None`).
fn copy_around(
    out: &mut Vec<u8>,
    aux: &[u8],
    a: Option<(usize, usize)>,
    b: Option<(usize, usize)>,
) {
    let (mut a, mut b) = (a, b);
    if let (Some(x), Some(y)) = (a, b) {
        if y.0 < x.0 {
            (a, b) = (Some(y), Some(x));
        }
    }
    let mut at = 0;
    for (s, e) in [a, b].into_iter().flatten() {
        out.extend_from_slice(&aux[at..s]);
        at = e;
    }
    out.extend_from_slice(&aux[at..]);
}

impl Translation {
    /// Takes the warnings met while translating records so far.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Options of the header merge.
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// `-c`: `@RG` lines with the same ID are one group.
    pub combine_rg: bool,
    /// `-p`: `@PG` lines with the same ID are one program.
    pub combine_pg: bool,
    /// `-r`: the RG ID for each input (its file name without directory and extension).
    pub rg_override: Vec<Option<String>>,
}

/// The merged header under construction.
pub struct HeaderMerger {
    hd: Option<String>,
    sq: Vec<String>,
    refs: Vec<Reference>,
    sq_ids: HashMap<Vec<u8>, i32>,
    rg_lines: Vec<String>,
    pg_lines: Vec<String>,
    co_lines: Vec<String>,
    rg_ids: HashSet<String>,
    pg_ids: HashSet<String>,
    rng: Rand48,
    opts: MergeOptions,
    reset_order: bool,
    /// Warnings met while merging headers (samtools' text), for the caller to report.
    warnings: Vec<String>,
}

fn lines_of<'a>(text: &'a str, kind: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.lines()
        .filter(move |l| l.len() >= 3 && &l[..3] == kind && (l.len() == 3 || &l[3..4] == "\t"))
}

fn tag_value<'a>(line: &'a str, tag: &str) -> Option<&'a str> {
    line.split('\t').skip(1).find_map(|f| {
        f.strip_prefix(tag)
            .and_then(|v| v.strip_prefix(':'))
            .filter(|_| f.len() > 2)
    })
}

impl HeaderMerger {
    /// An empty merged header; `seed` is samtools' `-s`.
    pub fn new(opts: MergeOptions, seed: i64) -> Self {
        Self {
            hd: None,
            sq: Vec::new(),
            refs: Vec::new(),
            sq_ids: HashMap::new(),
            rg_lines: Vec::new(),
            pg_lines: Vec::new(),
            co_lines: Vec::new(),
            rg_ids: HashSet::new(),
            pg_ids: HashSet::new(),
            rng: Rand48::new(seed),
            opts,
            reset_order: false,
            warnings: Vec::new(),
        }
    }

    /// Takes the warnings met while merging headers so far.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// `gen_unique_id`: `prefix-%08lX` until unused.
    fn unique(&mut self, prefix: &str, is_rg: bool, always: bool) -> String {
        let ids = if is_rg { &self.rg_ids } else { &self.pg_ids };
        if !always && !ids.contains(prefix) {
            return prefix.to_string();
        }
        loop {
            let candidate = format!("{prefix}-{:08X}", self.rng.next_value());
            let ids = if is_rg { &self.rg_ids } else { &self.pg_ids };
            if !ids.contains(&candidate) {
                return candidate;
            }
        }
    }

    /// `trans_rg_pg`: the input's lines (IDs rewritten) still to be fixed up, and the ID map.
    fn rg_pg(
        &mut self,
        text: &str,
        is_rg: bool,
        override_id: Option<&str>,
    ) -> (Vec<String>, IdMap) {
        let kind = if is_rg { "@RG" } else { "@PG" };
        let merge = if is_rg {
            self.opts.combine_rg
        } else {
            self.opts.combine_pg
        };
        let mut out = Vec::new();
        let mut map = HashMap::new();
        let lines: Vec<String> = lines_of(text, kind).map(str::to_string).collect();
        for line in &lines {
            let Some(orig) = tag_value(line, "ID").map(str::to_string) else {
                continue;
            };
            let known = |s: &Self, id: &str| {
                if is_rg {
                    s.rg_ids.contains(id)
                } else {
                    s.pg_ids.contains(id)
                }
            };
            let (new_id, changed, add) = match override_id {
                Some(o) => (o.to_string(), true, !known(self, o)),
                None if !known(self, &orig) || merge => {
                    let add = !known(self, &orig);
                    (orig.clone(), false, add)
                }
                None => (self.unique(&orig, is_rg, true), true, true),
            };
            if add {
                let mut l = line.clone();
                if changed {
                    if let Some(at) = l.find("\tID:") {
                        let start = at + 4;
                        let end = l[start..].find('\t').map_or(l.len(), |e| start + e);
                        l.replace_range(start..end, &new_id);
                    }
                }
                out.push(l);
                if is_rg {
                    self.rg_ids.insert(new_id.clone());
                } else {
                    self.pg_ids.insert(new_id.clone());
                }
            }
            map.insert(orig.into_bytes(), Some(new_id.into_bytes()));
        }
        if is_rg && out.is_empty() {
            if let Some(o) = override_id {
                let id = self.unique(o, true, false);
                out.push(format!("@RG\tID:{id}"));
                self.rg_ids.insert(id.clone());
                map.insert(Vec::new(), Some(id.into_bytes()));
            }
        }
        (out, map)
    }

    /// Adds one input header (in input order) and returns how its records translate.
    pub fn add(&mut self, header: &Header, input: usize) -> Translation {
        let text = header.text();
        if self.hd.is_none() {
            self.hd = lines_of(text, "@HD").next().map(str::to_string);
        }
        let (tids, lost) = self.add_references(header, text);
        let override_id = self.opts.rg_override.get(input).cloned().flatten();
        let (rg_lines, rg) = self.rg_pg(text, true, override_id.as_deref());
        let (pg_lines, pg) = self.rg_pg(text, false, None);
        self.finish_rg_pg(rg_lines, pg_lines, &pg);
        self.co_lines
            .extend(lines_of(text, "@CO").map(str::to_string));
        Translation {
            tids,
            rg,
            pg,
            lost_coordinate_order: lost,
            attach_rg: override_id.map(String::into_bytes),
            warned: Default::default(),
            warnings: Default::default(),
        }
    }

    /// Adds the references of `header` (text `text`) not seen yet, with their `@SQ` lines; how its
    /// reference ids translate, and whether the translation breaks the coordinate order.
    fn add_references(&mut self, header: &Header, text: &str) -> (Vec<i32>, bool) {
        let mut tids = Vec::with_capacity(header.references().len());
        let mut max_tid = -1;
        let mut lost = false;
        let sq_lines: HashMap<&str, &str> = lines_of(text, "@SQ")
            .filter_map(|l| tag_value(l, "SN").map(|sn| (sn, l)))
            .collect();
        for r in header.references() {
            let tid = match self.sq_ids.get(&r.name) {
                Some(&t) => t,
                None => {
                    let t = self.refs.len() as i32;
                    let name = String::from_utf8_lossy(&r.name).into_owned();
                    let line = sq_lines
                        .get(name.as_str())
                        .map(|l| l.to_string())
                        .unwrap_or_else(|| format!("@SQ\tSN:{name}\tLN:{}", r.length));
                    self.sq.push(line);
                    self.refs.push(r.clone());
                    self.sq_ids.insert(r.name.clone(), t);
                    t
                }
            };
            if tid > max_tid {
                max_tid = tid;
            } else {
                lost = true;
            }
            tids.push(tid);
        }
        (tids, lost)
    }

    /// `finish_rg_pg`: PG: tags of @RG and PP: tags of @PG point at the translated program IDs
    /// (`pg`); the lines join the merged header's.
    fn finish_rg_pg(&mut self, rg_lines: Vec<String>, pg_lines: Vec<String>, pg: &IdMap) {
        for (lines, search, dest) in [(rg_lines, "\tPG:", true), (pg_lines, "\tPP:", false)] {
            for mut l in lines {
                if let Some(at) = l.find(search) {
                    let start = at + 4;
                    let end = l[start..].find('\t').map_or(l.len(), |e| start + e);
                    match pg.get(&l.as_bytes()[start..end]) {
                        Some(Some(new)) => {
                            let new = String::from_utf8_lossy(new).into_owned();
                            l.replace_range(start..end, &new);
                        }
                        _ => self.warnings.push(format!(
                            "[W::finish_rg_pg] Tag {}{} not found in @PG records",
                            &search[1..],
                            &l[start..end]
                        )),
                    }
                }
                if dest {
                    self.rg_lines.push(l);
                } else {
                    self.pg_lines.push(l);
                }
            }
        }
    }

    /// Marks the coordinate order as lost: `@HD SO:unsorted`, no `SS`/`GO`.
    pub fn reset_order(&mut self) {
        self.reset_order = true;
    }

    /// Whether an `@HD` line was found.
    pub fn has_hd(&self) -> bool {
        self.hd.is_some()
    }

    /// The merged header.
    pub fn finish(self) -> Header {
        let mut text = String::new();
        if let Some(hd) = &self.hd {
            if self.reset_order {
                let mut fields: Vec<&str> = hd.split('\t').collect();
                fields.retain(|f| !f.starts_with("SS:") && !f.starts_with("GO:"));
                let mut line = fields.join("\t");
                match line.find("\tSO:") {
                    Some(at) => {
                        let start = at + 4;
                        let end = line[start..].find('\t').map_or(line.len(), |e| start + e);
                        line.replace_range(start..end, "unsorted");
                    }
                    None => line.push_str("\tSO:unsorted"),
                }
                text.push_str(&line);
            } else {
                text.push_str(hd);
            }
            text.push('\n');
        }
        for l in self
            .sq
            .iter()
            .chain(&self.rg_lines)
            .chain(&self.pg_lines)
            .chain(&self.co_lines)
        {
            text.push_str(l);
            text.push('\n');
        }
        Header::new(text, self.refs)
    }
}

impl Translation {
    /// Whether records can be copied unchanged when they carry no RG/PG tag.
    pub fn tids_identity(&self) -> bool {
        self.tids.iter().enumerate().all(|(i, &t)| t == i as i32)
    }

    /// `bam_translate` (and `-r`): appends the translated record (with `block_size`) to `out`.
    /// Reference ids are remapped; an RG or PG tag is removed and, if its ID is in the header,
    /// appended again (so it moves to the end, as in samtools) with the translated ID.
    pub fn translate_into<'a>(&self, raw: &'a [u8], out: &mut Vec<u8>, identity: bool) {
        let rec = &raw[4..];
        let r = crate::RecordRef::new_unchecked(rec);
        let aux = r.aux_bytes();
        let aux_start = rec.len() - aux.len();
        let find = |tag: &[u8; 2]| {
            AuxIter::new(aux)
                .find(|f| &f.tag() == tag)
                .map(|f| (f.raw.as_ptr() as usize - aux.as_ptr() as usize, f))
        };
        let rg = find(b"RG");
        let pg = find(b"PG");
        if identity && rg.is_none() && pg.is_none() {
            out.extend_from_slice(raw);
            return;
        }
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&rec[..aux_start]);
        let map_tid = |t: i32| {
            if t >= 0 {
                self.tids.get(t as usize).copied().unwrap_or(t)
            } else {
                t
            }
        };
        let body = start + 4;
        let tid = map_tid(i32::from_le_bytes(rec[0..4].try_into().expect("4 bytes")));
        let mtid = map_tid(i32::from_le_bytes(rec[20..24].try_into().expect("4 bytes")));
        out[body..body + 4].copy_from_slice(&tid.to_le_bytes());
        out[body + 20..body + 24].copy_from_slice(&mtid.to_le_bytes());
        // Aux fields without the first RG and PG, then the translated RG, then PG (samtools order:
        // RG is re-appended first, PG second).
        // Copy the aux fields around the removed RG and PG (at most two cuts, in field order).
        let span = |t: &Option<(usize, crate::aux::AuxField<'_>)>| {
            t.as_ref().map(|(o, f)| (*o, *o + f.raw.len()))
        };
        copy_around(out, aux, span(&rg), span(&pg));
        let string_value = |f: &crate::aux::AuxField<'a>| -> &'a [u8] {
            if f.value_type() == b'Z' || f.value_type() == b'H' {
                f.value()
            } else {
                &[]
            }
        };
        if let Some((_, f)) = &rg {
            let id = string_value(f);
            match self.rg.get(id) {
                Some(Some(new)) => push_z(out, b"RG", new),
                Some(None) => {}
                None => self.warn_unknown_rg(id, r.read_name()),
            }
        }
        if let Some((_, f)) = &pg {
            if let Some(Some(new)) = self.pg.get(string_value(f)) {
                push_z(out, b"PG", new);
            }
        }
        let len = (out.len() - body) as u32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// samtools reports an unknown RG once per input and ID.
    fn warn_unknown_rg(&self, id: &[u8], read_name: &[u8]) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.insert(id.to_vec()) {
            let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
            w.push(format!(
                "[bam_translate] RG tag \"{}\" on read \"{}\" encountered with no corresponding entry in header, tag lost. Unknown tags are only reported once per input file for each tag ID.",
                String::from_utf8_lossy(id),
                String::from_utf8_lossy(read_name)
            ));
        }
    }

    /// `samtools merge -r` at output time (after the merge has ordered the record): the first RG
    /// field is removed and the input's RG appended. Returns `false` (and leaves `out` alone) when
    /// there is nothing to attach.
    pub fn attach_rg_into(&self, raw: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(attach) = &self.attach_rg else {
            return false;
        };
        out.clear();
        out.extend_from_slice(raw);
        remove_first_rg(out, 4);
        push_z(out, b"RG", attach);
        let len = (out.len() - 4) as u32;
        out[..4].copy_from_slice(&len.to_le_bytes());
        true
    }
}

fn push_z(out: &mut Vec<u8>, tag: &[u8; 2], value: &[u8]) {
    out.extend_from_slice(tag);
    out.push(b'Z');
    out.extend_from_slice(value);
    out.push(0);
}

/// Removes the first RG field (htslib `bam_aux_get`) of the record at `body` in `out` (for `-r`).
fn remove_first_rg(out: &mut Vec<u8>, body: usize) {
    let rec = &out[body..];
    let r = crate::RecordRef::new_unchecked(rec);
    let aux = r.aux_bytes();
    let aux_start = body + rec.len() - aux.len();
    if let Some(f) = AuxIter::new(aux).find(|f| &f.tag() == b"RG") {
        let s = aux_start + (f.raw.as_ptr() as usize - aux.as_ptr() as usize);
        let e = s + f.raw.len();
        out.drain(s..e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_matches_glibc() {
        // glibc: srand48(0); lrand48() three times (checked with ctypes).
        let mut r = Rand48::new(0);
        assert_eq!(
            [r.next_value(), r.next_value(), r.next_value()],
            [366_850_414, 1_610_402_240, 206_956_554]
        );
    }
}

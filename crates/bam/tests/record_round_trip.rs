//! Property tests of records through every encode and decode path of the crate, for random valid
//! records (see `support/records.rs`: all flags, refIDs -1..3, long names, CIGARs up to and past
//! 65535 ops, odd and even sequences, absent qualities, aux fields of every type):
//! - the views ([`RecordRef`]) read back every field the record was written with;
//! - SAM text: [`format_record`] writes the line samtools prints, and [`parse_record`] turns that line
//!   back into the same bytes;
//! - files: a SAM file through [`SamReader`] and a BAM file through [`ChunkStream`] (records cut by
//!   BGZF block and chunk boundaries) give back the records, byte for byte;
//! - SAM text is a fixed point for the aux values SAM text cannot keep exactly (integers stored wider
//!   than needed, any `f`/`d`/`B:f` value including infinities, NaN and subnormals): formatting the
//!   record, parsing the line and formatting again gives the same line;
//! - edits: [`RecordBuf`] renaming, flag setting and appended aux fields give the record written with
//!   those fields.
//!
//! `PROPTEST_CASES` sets the number of cases (default here: 64, under a second).

#[path = "support/records.rs"]
mod records;

use proptest::prelude::*;
use records::{encode, encode_aux, header_text, rec, sam_line, Rec, Value};
use sortase_bam::sam_format::format_record;
use sortase_bam::sam_parse::parse_record;
use sortase_bam::{check_record, ChunkStream, Header, RecordBuf, RecordRef, SamReader};
use sortase_bgzf::{
    CompressionLevel, ParallelReader, ParallelWriter, ReaderOptions, WriterOptions,
};
use std::io::Write;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 64;
    }
    config
}

fn header() -> Header {
    Header::from_sam_text(header_text()).unwrap()
}

/// `record` with its `block_size` prefix.
fn with_block_size(record: &[u8]) -> Vec<u8> {
    let mut out = (record.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(record);
    out
}

/// The value of an aux field as `r` stores it, in the model's terms.
fn aux_bytes(tag: [u8; 2], value: &Value) -> Vec<u8> {
    let mut b = Vec::new();
    encode_aux(tag, value, &mut b);
    b
}

fn check_view(v: &RecordRef<'_>, r: &Rec) -> Result<(), TestCaseError> {
    prop_assert_eq!(v.read_name(), &r.name[..]);
    prop_assert_eq!(v.flag(), r.flag);
    prop_assert_eq!(v.reference_sequence_id(), r.ref_id);
    prop_assert_eq!(v.position(), r.pos);
    prop_assert_eq!(v.mapping_quality(), r.mapq);
    prop_assert_eq!(v.bin(), r.bin());
    prop_assert_eq!(v.mate_reference_sequence_id(), r.next_ref_id);
    prop_assert_eq!(v.mate_position(), r.next_pos);
    prop_assert_eq!(v.template_length(), r.tlen);
    prop_assert_eq!(v.cigar().iter().collect::<Vec<_>>(), r.cigar.clone());
    prop_assert_eq!(v.long_cigar().is_some(), r.long_cigar());
    prop_assert_eq!(v.reference_length(), r.reference_length());
    prop_assert_eq!(v.end_position(), r.end_position());
    prop_assert_eq!(v.l_seq() as usize, r.seq.len());
    let packed = v.sequence_packed();
    let bases: Vec<u8> = (0..r.seq.len())
        .map(|i| (packed[i / 2] >> (4 * (1 - i % 2))) & 15)
        .collect();
    prop_assert_eq!(bases, r.seq.clone());
    match &r.qual {
        Some(q) => prop_assert_eq!(v.quality_scores(), &q[..]),
        None => prop_assert!(v.quality_scores().iter().all(|&q| q == 0xff)),
    }
    let mut aux = v.aux();
    let fields: Vec<Vec<u8>> = aux.by_ref().map(|f| f.raw.to_vec()).collect();
    prop_assert!(!aux.error());
    let mut expected: Vec<Vec<u8>> = r.aux.iter().map(|(t, v)| aux_bytes(*t, v)).collect();
    if r.long_cigar() {
        expected.push(aux_bytes(
            *b"CG",
            &Value::IntArray(b'I', r.cigar.iter().map(|&op| i64::from(op)).collect()),
        ));
    }
    prop_assert_eq!(fields, expected);
    for (field, (_, value)) in v.aux().zip(&r.aux) {
        if let Value::Int(i) = value {
            prop_assert_eq!(field.integer(), Some(*i));
        }
    }
    Ok(())
}

/// A BGZF-compressed BAM file of `records` (written without regard to record boundaries, so
/// records straddle blocks).
fn bam_file(header: &Header, records: &[Vec<u8>]) -> Vec<u8> {
    let mut w = ParallelWriter::new(
        Vec::new(),
        WriterOptions::new(2, CompressionLevel::samtools(1)),
    );
    w.write_all(&header.to_bam_bytes()).unwrap();
    for r in records {
        w.write_all(&with_block_size(r)).unwrap();
    }
    w.finish().unwrap().0
}

/// Aux fields as BAM may store them but SAM parsing would not write them: integers in any type that
/// holds the value, floats of any value.
fn loose_aux() -> impl Strategy<Value = Vec<u8>> {
    let int = prop::sample::select(b"cCsSiI".to_vec()).prop_flat_map(|t| {
        let width = match t {
            b'c' | b'C' => 1,
            b's' | b'S' => 2,
            _ => 4,
        };
        prop::collection::vec(any::<u8>(), width).prop_map(move |v| [vec![t], v].concat())
    });
    let value = prop_oneof![
        int,
        any::<f32>().prop_map(|f| [vec![b'f'], f.to_le_bytes().to_vec()].concat()),
        any::<f64>().prop_map(|f| [vec![b'd'], f.to_le_bytes().to_vec()].concat()),
        prop::collection::vec(any::<f32>(), 0..4).prop_map(|fs| {
            let mut v = b"Bf".to_vec();
            v.extend((fs.len() as u32).to_le_bytes());
            fs.iter().for_each(|f| v.extend(f.to_le_bytes()));
            v
        }),
    ];
    ("[A-Za-z][A-Za-z0-9]", value)
        .prop_filter("CG is the long-CIGAR tag", |(t, _)| t != "CG")
        .prop_map(|(t, v)| [t.into_bytes(), v].concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn views_read_back_every_field(r in rec()) {
        let bytes = encode(&r);
        let v = RecordRef::new(&bytes).map_err(TestCaseError::fail)?;
        check_view(&v, &r)?;
        prop_assert!(check_record(&bytes, 3, 0).is_ok());
    }

    #[test]
    fn sam_text_round_trips(r in rec()) {
        let (bytes, line, h) = (encode(&r), sam_line(&r), header());
        let mut text = Vec::new();
        format_record(&RecordRef::new(&bytes).unwrap(), &h, &mut text);
        prop_assert_eq!(String::from_utf8_lossy(&text), line.as_str());
        let mut parsed = b"prefix".to_vec();
        parse_record(line.strip_suffix('\n').unwrap().as_bytes(), &h, &mut parsed).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&parsed[..6], b"prefix");
        prop_assert_eq!(&parsed[6..], &with_block_size(&bytes)[..]);
    }

    #[test]
    fn sam_text_is_a_fixed_point(
        r in rec(),
        extra in prop::collection::vec(loose_aux(), 1..6),
    ) {
        let h = header();
        let mut bytes = encode(&r);
        extra.iter().for_each(|f| bytes.extend_from_slice(f));
        let mut line = Vec::new();
        format_record(&RecordRef::new(&bytes).unwrap(), &h, &mut line);
        let mut parsed = Vec::new();
        parse_record(&line[..line.len() - 1], &h, &mut parsed).map_err(TestCaseError::fail)?;
        let mut again = Vec::new();
        format_record(&RecordRef::new(&parsed[4..]).unwrap(), &h, &mut again);
        prop_assert_eq!(String::from_utf8_lossy(&again), String::from_utf8_lossy(&line));
    }

    #[test]
    fn sam_and_bam_files_round_trip(
        rs in prop::collection::vec(rec(), 0..12),
        target in prop::sample::select(vec![1usize, 100, 1 << 20]),
    ) {
        let h = header();
        let records: Vec<Vec<u8>> = rs.iter().map(encode).collect();
        let raw: Vec<Vec<u8>> = records.iter().map(|r| with_block_size(r)).collect();

        let mut sam = header_text();
        sam.extend(rs.iter().map(sam_line));
        let (h2, mut reader) = SamReader::new(std::io::Cursor::new(sam)).unwrap();
        prop_assert_eq!(h2.references().len(), 3);
        let mut got = Vec::new();
        while let Some(batch) = reader.next_batch(&h2, target).map_err(|e| TestCaseError::fail(e.to_string()))? {
            got.extend(batch.iter_raw().map(<[u8]>::to_vec));
        }
        prop_assert_eq!(&got, &raw);

        let mut o = ReaderOptions::with_threads(2);
        o.batch_bytes = target;
        let mut s = ChunkStream::new(Box::new(ParallelReader::new(
            std::io::Cursor::new(bam_file(&h, &records)),
            o,
        )));
        let h3 = s.read_header().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(h3.references().len(), 3);
        let mut got = Vec::new();
        while let Some(batch) = s.next_batch().map_err(|e| TestCaseError::fail(e.to_string()))? {
            got.extend(batch.iter_raw().map(<[u8]>::to_vec));
        }
        prop_assert_eq!(&got, &raw);
    }

    #[test]
    fn record_buf_edits_give_the_edited_record(
        r in rec(),
        name in "[!-?A-~]{1,254}",
        flag in any::<u16>(),
        extra in prop::collection::vec(
            (prop::sample::select(vec![*b"MC", *b"MQ", *b"ms", *b"XX"]), any::<i32>()),
            0..4,
        ),
    ) {
        let mut buf = RecordBuf::default();
        buf.copy_from(&with_block_size(&encode(&r)));
        prop_assert!(buf.set_read_name(name.as_bytes()));
        buf.set_flag(flag);
        for (tag, v) in &extra {
            let value = aux_bytes(*tag, &Value::Int(i64::from(*v)));
            buf.push_aux(*tag, value[2], &value[3..]);
        }
        let mut edited = r.clone();
        edited.name = name.into_bytes();
        edited.flag = flag;
        // The bin stays as it was (a flag change does not recompute it), so build the expected
        // bytes from the original record's bin.
        let mut expected = encode(&edited);
        expected[10..12].copy_from_slice(&r.bin().to_le_bytes());
        for (tag, v) in &extra {
            expected.extend(aux_bytes(*tag, &Value::Int(i64::from(*v))));
        }
        prop_assert_eq!(buf.as_raw(), &with_block_size(&expected)[..]);
        prop_assert!(RecordRef::new(&buf.as_raw()[4..]).is_ok());
    }
}

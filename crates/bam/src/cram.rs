//! CRAM through noodles: reading into raw BAM records, writing raw records as CRAM. CRAM needs the
//! reference (`--reference`/`-T`): a FASTA, indexed (`.fai`) or small enough to load.

use crate::{BamError, Header, RecordBatch};
use noodles::{bam, cram, fasta, sam};
use sam::alignment::io::Write as _;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;

fn cram_err(e: impl std::fmt::Display) -> BamError {
    BamError::Cram(e.to_string())
}

/// A reference repository for CRAM from a FASTA path (none: references are not available).
pub fn repository(reference: Option<&Path>) -> Result<fasta::Repository, BamError> {
    let Some(path) = reference else {
        return Ok(fasta::Repository::default());
    };
    let mut fai = path.as_os_str().to_owned();
    fai.push(".fai");
    if Path::new(&fai).exists() {
        let reader = fasta::io::indexed_reader::Builder::default()
            .build_from_path(path)
            .map_err(|e| cram_err(format!("{}: {e}", path.display())))?;
        Ok(fasta::Repository::new(
            fasta::repository::adapters::IndexedReader::new(reader),
        ))
    } else {
        let file = File::open(path).map_err(|e| cram_err(format!("{}: {e}", path.display())))?;
        let records: Vec<fasta::Record> = fasta::io::Reader::new(BufReader::new(file))
            .records()
            .collect::<Result<_, _>>()
            .map_err(|e| cram_err(format!("{}: {e}", path.display())))?;
        Ok(fasta::Repository::new(records))
    }
}

/// The SAM text of a noodles header.
pub fn header_text(header: &sam::Header) -> Result<String, BamError> {
    let mut w = sam::io::Writer::new(Vec::new());
    w.write_header(header)?;
    String::from_utf8(w.into_inner())
        .map_err(|_| BamError::Header("header text is not UTF-8".into()))
}

/// Reads a whole CRAM file as our header plus an iterator of record batches.
pub struct CramReader {
    reader: cram::io::Reader<BufReader<Box<dyn Read + Send>>>,
    header: sam::Header,
}

impl CramReader {
    /// Reads CRAM from `inner` with an optional reference FASTA.
    pub fn new(
        inner: Box<dyn Read + Send>,
        reference: Option<&Path>,
    ) -> Result<(Header, Self), BamError> {
        let mut reader = cram::io::reader::Builder::default()
            .set_reference_sequence_repository(repository(reference)?)
            .build_from_reader(BufReader::new(inner));
        let header = reader.read_header().map_err(cram_err)?;
        let ours = Header::from_sam_text(header_text(&header)?)?;
        Ok((ours, Self { reader, header }))
    }

    /// Converts every record to raw BAM and hands out batches of about `target_bytes`.
    pub fn for_each_batch(
        &mut self,
        target_bytes: usize,
        mut f: impl FnMut(RecordBatch) -> Result<(), BamError>,
    ) -> Result<(), BamError> {
        let mut encoder = bam::io::Writer::from(Vec::new());
        let mut offsets = Vec::new();
        for result in self.reader.records(&self.header) {
            let record = result.map_err(cram_err)?;
            let at = encoder.get_ref().len();
            offsets.push(at as u32);
            encoder
                .write_alignment_record(&self.header, &record)
                .map_err(cram_err)?;
            // CRAM keeps no MAPQ for unmapped reads; htslib decodes it as 0, noodles as 255 (missing).
            let raw = &mut encoder.get_mut()[at + 4..];
            let flag = u16::from_le_bytes([raw[14], raw[15]]);
            if flag & crate::flags::UNMAPPED != 0 && raw[9] == 255 {
                raw[9] = 0;
            }
            if encoder.get_ref().len() >= target_bytes {
                let buf = std::mem::take(encoder.get_mut());
                let end = buf.len();
                f(RecordBatch::from_parts(
                    buf,
                    std::mem::take(&mut offsets),
                    end,
                    0,
                ))?;
            }
        }
        let buf = std::mem::take(encoder.get_mut());
        if !offsets.is_empty() {
            let end = buf.len();
            f(RecordBatch::from_parts(buf, offsets, end, 0))?;
        }
        Ok(())
    }
}

/// Writes raw BAM records as CRAM.
pub struct CramWriter<W: Write> {
    writer: cram::io::Writer<W>,
    header: sam::Header,
}

impl<W: Write> CramWriter<W> {
    /// Starts a CRAM stream with `header` and an optional reference FASTA.
    pub fn new(inner: W, header: &Header, reference: Option<&Path>) -> Result<Self, BamError> {
        let header = header.to_noodles()?;
        let mut writer = cram::io::writer::Builder::default()
            .set_reference_sequence_repository(repository(reference)?)
            .build_from_writer(inner);
        writer.write_header(&header).map_err(cram_err)?;
        Ok(Self { writer, header })
    }

    /// Writes the records of a batch.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), BamError> {
        let mut reader = bam::io::Reader::from(batch.bytes());
        let mut record = bam::Record::default();
        while reader.read_record(&mut record).map_err(cram_err)? > 0 {
            self.writer
                .write_alignment_record(&self.header, &record)
                .map_err(cram_err)?;
        }
        Ok(())
    }

    /// Ends the stream (last container and EOF container) and returns the inner writer.
    pub fn finish(mut self) -> Result<W, BamError> {
        self.writer.try_finish(&self.header).map_err(cram_err)?;
        Ok(self.writer.into_inner())
    }
}

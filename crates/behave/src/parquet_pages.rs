//! Checks a Parquet file's page headers before the parquet crate decodes the pages: a page whose
//! header claims more than its bytes can hold is corrupt, and the crate would allocate the claim.
//!
//! Why: parquet (60.1) trusts two header fields with memory, both found by fuzzing. It sizes the
//! output of a compressed page from `uncompressed_page_size` and its Snappy codec zero-fills that
//! much before decompressing (`serialized_reader::decode_page`): a 4 KB file claiming 1.9 GB made
//! numaff write 1.9 GB (crates/behave/tests/fixtures/parquet-page-claims-2gb.parquet). And it sizes
//! a column's dictionary from the dictionary page's `num_values` (`DictDecoder::set_dict`
//! zero-fills that many values): a claim of 536 M INT32 values filled 2 GB. So a Snappy page may
//! claim at most what Snappy can make of its compressed bytes, and a dictionary page at most the
//! values its bytes hold at the column's PLAIN width. The crate offers no page-header access, so
//! this module walks the headers itself: Thrift compact protocol (thrift-compact-protocol.md)
//! read as the crate reads it, `PageHeader` of parquet.thrift (field 1 type, 2
//! uncompressed_page_size, 3 compressed_page_size, 7 dictionary_page_header whose field 1 is
//! num_values; the rest skipped). It rejects only what no writer can produce and leaves every
//! other judgement (truncation, garbage, unsupported codecs) to the crate.

use parquet::basic::{Compression, Type};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;

/// The most bytes Snappy decodes from one byte of its stream. The densest element is a copy with
/// a 2-byte offset: 3 bytes for up to 64 bytes of output (Snappy's format_description.txt, 2.2);
/// so a stream of n bytes decodes to at most 64/3 n < 22 n bytes.
pub const SNAPPY_MAX_EXPANSION: u64 = 22;

/// Bytes of a page header read at first; a header with large statistics is read again, longer.
const HEADER_WINDOW: u64 = 4096;

/// Deepest nesting of Thrift structs and lists walked: the crate's skip depth (a `PageHeader`
/// itself nests three deep).
const MAX_DEPTH: u32 = 64;

/// `PageType::DICTIONARY_PAGE` of parquet.thrift.
const DICTIONARY_PAGE: i32 = 2;

/// A page header's fields that the check needs.
#[derive(Debug, Default, PartialEq)]
struct PageHeader {
    kind: Option<i32>,
    uncompressed: Option<i32>,
    compressed: Option<i32>,
    /// `num_values` of the dictionary page header.
    dictionary_values: Option<i32>,
}

/// Why a header could not be read.
#[derive(Debug, PartialEq)]
enum Walk {
    /// The bytes end inside the header.
    Truncated,
    /// Not Thrift compact protocol.
    Invalid,
}

/// A reading position in the bytes of one header.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: u32,
}

// Thrift compact protocol type codes.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            bytes,
            at: 0,
            depth: 0,
        }
    }

    fn byte(&mut self) -> Result<u8, Walk> {
        let b = *self.bytes.get(self.at).ok_or(Walk::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn skip_bytes(&mut self, n: u64) -> Result<(), Walk> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(Walk::Truncated);
        }
        self.at += n as usize;
        Ok(())
    }

    /// An unsigned LEB128 varint, read as the crate reads it (`read_vlq`): of any length, each
    /// byte's bits shifted by 7 more with a wrapping shift, so an over-long varint gives the
    /// crate's value (a fuzzed 18-byte one claimed 1,893,843,855 bytes).
    fn varint(&mut self) -> Result<u64, Walk> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f).wrapping_shl(shift);
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift = shift.wrapping_add(7);
        }
    }

    fn zigzag(&mut self) -> Result<i64, Walk> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An i32 as the crate reads it: the zigzag value truncated.
    fn i32(&mut self) -> Result<i32, Walk> {
        Ok(self.zigzag()? as i32)
    }

    /// Reads a struct's fields up to its stop byte, handing each (field id, type) to `field`,
    /// which must consume the value (with `skip_field` when it does not want it).
    fn fields(
        &mut self,
        field: &mut dyn FnMut(&mut Self, i16, u8) -> Result<(), Walk>,
    ) -> Result<(), Walk> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Walk::Invalid);
        }
        let mut id: i16 = 0;
        loop {
            let header = self.byte()?;
            let (delta, ty) = (header >> 4, header & 0x0f);
            // As the crate: a zero type is the stop field whatever the delta; a long field id is
            // an i16 truncated from its zigzag varint.
            if ty == 0 {
                break;
            }
            id = if delta == 0 {
                self.zigzag()? as i16
            } else {
                id.checked_add(i16::from(delta)).ok_or(Walk::Invalid)?
            };
            field(self, id, ty)?;
        }
        self.depth -= 1;
        Ok(())
    }

    /// Skips a field's value: a boolean field's value is in its type code.
    fn skip_field(&mut self, ty: u8) -> Result<(), Walk> {
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            _ => self.skip_value(ty),
        }
    }

    /// Skips a value inside a list, set or map (booleans take a byte there).
    fn skip_value(&mut self, ty: u8) -> Result<(), Walk> {
        match ty {
            BOOL_TRUE | BOOL_FALSE | BYTE => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(|_| ()),
            DOUBLE => self.skip_bytes(8),
            UUID => self.skip_bytes(16),
            BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            LIST | SET => {
                let header = self.byte()?;
                let n = match header >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                self.elements(n, &[header & 0x0f])
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                self.elements(n, &[types >> 4, types & 0x0f])
            }
            STRUCT => self.fields(&mut |c, _, ty| c.skip_field(ty)),
            _ => Err(Walk::Invalid),
        }
    }

    /// Skips `n` elements, each a value of each of `types` (one type for lists, two for maps).
    /// Every element takes at least a byte, so a count larger than the bytes left ends the walk
    /// as soon as they run out.
    fn elements(&mut self, n: u64, types: &[u8]) -> Result<(), Walk> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Walk::Invalid);
        }
        for _ in 0..n {
            for &ty in types {
                self.skip_value(ty)?;
            }
        }
        self.depth -= 1;
        Ok(())
    }
}

/// Reads a `PageHeader` from the start of `bytes`: its fields and its length in bytes.
fn page_header(bytes: &[u8]) -> Result<(PageHeader, usize), Walk> {
    let mut h = PageHeader::default();
    let mut c = Cursor::new(bytes);
    c.fields(&mut |c, id, ty| match (id, ty) {
        (1, I32) => {
            h.kind = Some(c.i32()?);
            Ok(())
        }
        (2, I32) => {
            h.uncompressed = Some(c.i32()?);
            Ok(())
        }
        (3, I32) => {
            h.compressed = Some(c.i32()?);
            Ok(())
        }
        (7, STRUCT) => c.fields(&mut |c, id, ty| match (id, ty) {
            (1, I32) => {
                h.dictionary_values = Some(c.i32()?);
                Ok(())
            }
            _ => c.skip_field(ty),
        }),
        _ => c.skip_field(ty),
    })?;
    Ok((h, c.at))
}

/// Walks the page headers of every column chunk and returns an error message for the first page
/// claiming more than its bytes can hold: a Snappy page more uncompressed bytes than Snappy can
/// produce from its compressed bytes ([`SNAPPY_MAX_EXPANSION`]), a dictionary page more values
/// than its (uncompressed) bytes hold at the column's PLAIN width. Else the number of pages
/// checked. Like the crate's page reader, a chunk's walk goes on to the end of its byte range,
/// whatever its value count says. A header that cannot be read within the chunk (truncated, not
/// Thrift, no sizes or negative ones) is an error too: the crate refuses it as well, but reading
/// it may take minutes first (its stream reader skips a list of 2^31 elements one by one past the
/// end of the data: found by fuzzing). Chunks of codecs numaff's build lacks are left to the
/// crate, which refuses them.
pub fn check_pages<R: ChunkReader>(input: &R, metadata: &ParquetMetaData) -> Result<u64, String> {
    let mut pages = 0u64;
    for (g, group) in metadata.row_groups().iter().enumerate() {
        for column in group.columns() {
            let snappy = match column.compression() {
                Compression::SNAPPY => true,
                Compression::UNCOMPRESSED => false,
                _ => continue,
            };
            // `byte_range()`'s reading, without its panic on negative values (found by fuzzing):
            // such a chunk is left to the crate, whose panic numaff's reader catches.
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let (Ok(start), Ok(length)) = (
                u64::try_from(start),
                u64::try_from(column.compressed_size()),
            ) else {
                continue;
            };
            let corrupt = |at: u64, what: String| {
                format!(
                    "row group {g}, column {}, byte {at}: the {what}: the file is corrupt",
                    column.column_path().string()
                )
            };
            let end = start.saturating_add(length).min(input.len());
            let mut at = start;
            while at < end {
                let (header, header_len) =
                    read_header(input, at, end).map_err(|e| corrupt(at, e))?;
                let (Some(Ok(uncompressed)), Some(Ok(compressed))) = (
                    header.uncompressed.map(u64::try_from),
                    header.compressed.map(u64::try_from),
                ) else {
                    return Err(corrupt(
                        at,
                        "page header lacks its sizes or has a negative one".into(),
                    ));
                };
                if snappy && uncompressed > compressed.saturating_mul(SNAPPY_MAX_EXPANSION) {
                    return Err(corrupt(
                        at,
                        format!(
                            "page claims {uncompressed} bytes uncompressed from {compressed} \
                             Snappy-compressed bytes, more than Snappy can produce \
                             ({SNAPPY_MAX_EXPANSION} per byte)"
                        ),
                    ));
                }
                if header.kind == Some(DICTIONARY_PAGE) {
                    // The bytes the crate decodes the dictionary from: the decompressed page, or
                    // the page itself when the chunk is not compressed.
                    let bytes = if snappy { uncompressed } else { compressed };
                    let values = header.dictionary_values.map_or(0, |v| v.max(0) as u64);
                    let bits = plain_bits(column);
                    if values.saturating_mul(bits) > bytes.saturating_mul(8) {
                        return Err(corrupt(
                            at,
                            format!(
                                "dictionary page claims {values} values in {bytes} bytes, more \
                                 than they hold ({bits} bits each)"
                            ),
                        ));
                    }
                }
                pages += 1;
                at = at
                    .saturating_add(header_len as u64)
                    .saturating_add(compressed);
            }
        }
    }
    Ok(pages)
}

/// The fewest bits a PLAIN-encoded value of the column takes (a BYTE_ARRAY its 4-byte length;
/// a FIXED_LEN_BYTE_ARRAY of length 0, which holds nothing, counts a bit).
fn plain_bits(column: &ColumnChunkMetaData) -> u64 {
    match column.column_type() {
        Type::BOOLEAN => 1,
        Type::INT32 | Type::FLOAT | Type::BYTE_ARRAY => 32,
        Type::INT64 | Type::DOUBLE => 64,
        Type::INT96 => 96,
        Type::FIXED_LEN_BYTE_ARRAY => {
            (u64::try_from(column.column_descr().type_length()).unwrap_or(0) * 8).max(1)
        }
    }
}

/// Reads the page header at `at` (it must end before `end`), in a window that grows until the
/// header fits; else what is wrong with it.
fn read_header<R: ChunkReader>(
    input: &R,
    at: u64,
    end: u64,
) -> Result<(PageHeader, usize), String> {
    let mut window = HEADER_WINDOW;
    loop {
        let len = window.min(end - at);
        let bytes = usize::try_from(len)
            .ok()
            .and_then(|len| input.get_bytes(at, len).ok())
            .ok_or_else(|| format!("page header cannot be read ({len} bytes from byte {at})"))?;
        match page_header(&bytes) {
            Ok(found) => return Ok(found),
            Err(Walk::Truncated) if len < end - at => window = window.saturating_mul(4),
            Err(Walk::Truncated) => {
                return Err("page header runs past the end of its column chunk".into())
            }
            Err(Walk::Invalid) => return Err("page header is not Thrift compact protocol".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
    use parquet::arrow::arrow_reader::ArrowReaderMetadata;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    /// A Snappy file of 3 row groups with many small pages: PLAIN times, dictionary-encoded kinds.
    fn many_pages() -> bytes::Bytes {
        let n = 60_000u64;
        let times: ArrayRef = Arc::new(UInt64Array::from_iter_values(
            (0..n).map(|i| i * 7919 % 1_000_003),
        ));
        let kinds: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| ["load", "store", "fault"][(i % 3) as usize]),
        ));
        let batch =
            RecordBatch::try_from_iter([("time_ns", times), ("kind", kinds)]).expect("batch");
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(20_000))
            .set_data_page_row_count_limit(2000)
            .set_write_batch_size(500)
            .set_column_dictionary_enabled("time_ns".into(), false)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        bytes::Bytes::from(out)
    }

    fn metadata(file: &bytes::Bytes) -> Arc<ParquetMetaData> {
        ArrowReaderMetadata::load(file, Default::default())
            .expect("metadata")
            .metadata()
            .clone()
    }

    #[test]
    fn the_walk_checks_every_page_the_crate_reads() {
        let file = many_pages();
        let reader = SerializedFileReader::new(file.clone()).expect("reader");
        let mut crate_pages = 0u64;
        for g in 0..reader.num_row_groups() {
            let group = reader.get_row_group(g).expect("row group");
            for c in 0..group.num_columns() {
                let pages = group.get_column_page_reader(c).expect("pages");
                for page in pages {
                    page.expect("page");
                    crate_pages += 1;
                }
            }
        }
        assert!(crate_pages > 50, "{crate_pages} pages");
        assert_eq!(check_pages(&file, &metadata(&file)), Ok(crate_pages));
    }

    #[test]
    fn a_page_claiming_more_than_snappy_can_produce_is_found_in_any_row_group() {
        let file = many_pages();
        let meta = metadata(&file);
        // The fifth page of the last row group's first column: its header starts with field 1
        // (type, one byte of value), then field 2, uncompressed_page_size, as a zigzag varint
        // that is rewritten to the largest value of the same length.
        let (mut at, _) = meta.row_groups()[2].column(0).byte_range();
        for _ in 0..4 {
            let bytes = file.slice(at as usize..);
            let (h, len) = page_header(&bytes).expect("header");
            at += len as u64 + h.compressed.expect("compressed") as u64;
        }
        let (h, _) = page_header(&file.slice(at as usize..)).expect("header");
        let mut bytes = file.to_vec();
        let field2 = at as usize + 2;
        assert_eq!(bytes[field2], field(1, I32));
        let varint = &mut bytes[field2 + 1..];
        let len = 1 + varint.iter().take_while(|b| **b & 0x80 != 0).count();
        // All value bits set but the lowest (zigzag: even is positive).
        varint[..len].fill(0xff);
        varint[0] = 0xfe;
        varint[len - 1] = 0x7f;
        let claimed = ((1u64 << (7 * len)) - 2) / 2;
        let compressed = h.compressed.expect("compressed") as u64;
        assert!(
            claimed > compressed * SNAPPY_MAX_EXPANSION,
            "{claimed} vs {compressed}"
        );
        let corrupt = bytes::Bytes::from(bytes);
        let err = check_pages(&corrupt, &metadata(&corrupt)).expect_err("corrupt");
        assert!(
            err.starts_with(&format!(
                "row group 2, column time_ns, byte {at}: the page claims {claimed} bytes"
            )),
            "{err}"
        );
    }

    /// A compact-protocol field header with a short delta.
    fn field(delta: u8, ty: u8) -> u8 {
        delta << 4 | ty
    }

    fn zigzag(v: i64) -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    /// Appends an i32 field `delta` ids after the previous one.
    fn i32_field(h: &mut Vec<u8>, delta: u8, value: i64) {
        h.push(field(delta, I32));
        h.extend(zigzag(value));
    }

    /// A data page v1 header as parquet writes it: type, sizes, crc, then the data page header
    /// (num_values, encodings, statistics with a binary max).
    fn data_page(uncompressed: i32, compressed: i32, values: i32) -> Vec<u8> {
        let mut h = Vec::new();
        i32_field(&mut h, 1, 0); // type DATA_PAGE
        i32_field(&mut h, 1, uncompressed.into());
        i32_field(&mut h, 1, compressed.into());
        i32_field(&mut h, 1, -12345); // crc
        h.push(field(1, STRUCT)); // 5: data_page_header
        for v in [values.into(), 0, 3, 3] {
            i32_field(&mut h, 1, v); // num_values, encoding, def and rep level encodings
        }
        h.push(field(1, STRUCT)); // 5: statistics
        h.push(field(1, BINARY));
        h.extend([3, b'a', b'b', b'c']);
        h.push(field(1, BOOL_TRUE));
        h.extend([0, 0, 0]);
        h
    }

    /// A trace (numaff's columns, Snappy) whose first `time_ns` page claims `claim` bytes
    /// uncompressed. The writer puts statistics in the page headers, so that the header written
    /// in its place without them, with a 5-byte varint for the claim, fits: it is padded to the
    /// old length with an over-long varint, which the crate reads as the same value. So the file
    /// is the writer's in every byte but the header.
    fn trace_claiming(claim: i32) -> Vec<u8> {
        use crate::sample::{Kind, Sample};
        use crate::tracefile::{schema, to_record_batch};
        use parquet::basic::Encoding;
        let samples: Vec<Sample> = (0..4_000u64)
            .map(|i| Sample {
                time_ns: 1_000_000 + i * 997,
                pid: 100,
                tid: 100 + (i % 4) as u32,
                cpu: (i % 4) as u32,
                node: 0,
                addr: 0x7f00_0000_0000 + (i * 7919 % 4096) * 64,
                kind: Kind::Load,
                latency_ns: None,
                data_source: None,
            })
            .collect();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_dictionary_enabled(false)
            .set_encoding(Encoding::PLAIN)
            .set_write_page_header_statistics(true)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema(), Some(props)).expect("writer");
        w.write(&to_record_batch(&samples).expect("batch"))
            .expect("write");
        w.close().expect("close");
        let file = bytes::Bytes::from(out);
        let (at, _) = metadata(&file).row_groups()[0].column(0).byte_range();
        let at = at as usize;
        let (h, old_len) = page_header(&file[at..]).expect("header");
        // DATA_PAGE; claim; compressed; data_page_header {num_values, PLAIN, RLE, RLE}.
        let mut header = vec![field(1, I32), 0, field(1, I32)];
        let mut claim_varint = zigzag(claim.into());
        claim_varint.resize(5, 0x80); // a 5-byte varint whatever the claim
        for b in &mut claim_varint[..4] {
            *b |= 0x80;
        }
        if claim_varint[4] == 0x80 {
            claim_varint[4] = 0;
        }
        header.extend(claim_varint);
        header.push(field(1, I32));
        let mut compressed = zigzag(h.compressed.expect("compressed").into());
        header.push(field(2, STRUCT));
        i32_field(&mut header, 1, 4_000); // the samples, all in this page (the honest read checks)
        for encoding in [0, 3, 3] {
            i32_field(&mut header, 1, encoding);
        }
        header.extend([0, 0]);
        let pad = old_len - header.len() - compressed.len();
        if pad > 0 {
            *compressed.last_mut().expect("a byte") |= 0x80;
            compressed.extend(std::iter::repeat_n(0x80, pad - 1));
            compressed.push(0);
        }
        let at_compressed = 3 + 5 + 1; // after the type, the claim and the next field header
        header.splice(at_compressed..at_compressed, compressed);
        assert_eq!(header.len(), old_len, "the new header fits in place");
        let mut bytes = file.to_vec();
        bytes[at..at + old_len].copy_from_slice(&header);
        bytes
    }

    /// The corrupt page fixture (see `trace_claiming`); `NUMAFF_REGENERATE_FIXTURES=1` writes it
    /// again. Claiming the true size reads back as the writer wrote it, so the rewrite is
    /// faithful; claiming 1.9 GB is caught before the crate decodes the page.
    #[test]
    fn a_rewritten_page_header_reads_back_and_a_false_claim_is_caught() {
        use crate::tracefile::TraceReader;
        use std::path::Path;
        let honest = trace_claiming(4_000 * 8);
        let read = TraceReader::from_parquet_bytes(Path::new("honest.parquet"), honest)
            .and_then(|r| r.read_all())
            .expect("the true size reads back");
        assert_eq!(read.len(), 4_000);
        assert_eq!(read[3_999].time_ns, 1_000_000 + 3_999 * 997);

        let claim = 1_893_843_855;
        let corrupt = trace_claiming(claim);
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/parquet-page-claims-2gb.parquet");
        if std::env::var_os("NUMAFF_REGENERATE_FIXTURES").is_some() {
            std::fs::write(&path, &corrupt).expect("write the fixture");
        }
        let bytes = bytes::Bytes::from(corrupt);
        let err = check_pages(&bytes, &metadata(&bytes)).expect_err("corrupt");
        assert!(
            err.contains(&format!("claims {claim} bytes uncompressed")),
            "{err}"
        );
    }

    #[test]
    fn a_data_page_header_gives_its_sizes_and_length() {
        let h = data_page(4000, 900, 512);
        let (header, len) = page_header(&h).expect("a header");
        assert_eq!(
            header,
            PageHeader {
                kind: Some(0),
                uncompressed: Some(4000),
                compressed: Some(900),
                dictionary_values: None,
            }
        );
        assert_eq!(len, h.len());
        // Bytes after the header are not read.
        let mut longer = h.clone();
        longer.extend([0xff; 10]);
        assert_eq!(page_header(&longer).expect("a header").1, h.len());
    }

    #[test]
    fn a_dictionary_page_header_gives_its_values() {
        let mut h = Vec::new();
        i32_field(&mut h, 1, DICTIONARY_PAGE.into());
        i32_field(&mut h, 1, 300);
        i32_field(&mut h, 1, 120);
        h.push(field(4, STRUCT)); // 7: dictionary_page_header
        i32_field(&mut h, 1, 75); // num_values
        i32_field(&mut h, 1, 0); // PLAIN
        h.push(field(1, BOOL_FALSE)); // is_sorted
        h.extend([0, 0]);
        let (header, len) = page_header(&h).expect("a header");
        assert_eq!(
            header,
            PageHeader {
                kind: Some(DICTIONARY_PAGE),
                uncompressed: Some(300),
                compressed: Some(120),
                dictionary_values: Some(75),
            }
        );
        assert_eq!(len, h.len());
    }

    /// The `kind` column's dictionary (3 strings, ~27 bytes) in the second row group made to
    /// claim 63 values: 63 BYTE_ARRAYs take at least 252 bytes.
    #[test]
    fn a_dictionary_page_claiming_more_values_than_its_bytes_hold_is_found() {
        let file = many_pages();
        let meta = metadata(&file);
        let column = meta.row_groups()[1].column(1);
        let at = column.dictionary_page_offset().expect("a dictionary") as usize;
        let (h, len) = page_header(&file[at..]).expect("header");
        assert_eq!(h.kind, Some(DICTIONARY_PAGE));
        assert_eq!(h.dictionary_values, Some(3));
        let bytes_held = h.uncompressed.expect("size");
        // num_values: the one-byte varint after the dictionary header's field headers.
        let header = &file[at..at + len];
        let nv = header
            .windows(3)
            .position(|w| w == [field(4, STRUCT), field(1, I32), 6])
            .expect("dictionary_page_header { num_values: 3 }")
            + 2;
        let mut bytes = file.to_vec();
        bytes[at + nv] = 126; // zigzag 63, still one byte
        assert!(63 * 4 > bytes_held, "{bytes_held} bytes");
        let corrupt = bytes::Bytes::from(bytes);
        let err = check_pages(&corrupt, &metadata(&corrupt)).expect_err("corrupt");
        assert_eq!(
            err,
            format!(
                "row group 1, column kind, byte {at}: the dictionary page claims 63 values in \
                 {bytes_held} bytes, more than they hold (32 bits each): the file is corrupt"
            )
        );
    }

    #[test]
    fn lists_maps_long_field_ids_and_uuids_are_skipped() {
        let mut h = vec![field(2, I32)];
        h.extend(zigzag(77)); // 2: uncompressed
        h.push(field(0, LIST)); // long form field id 40
        h.extend(zigzag(40));
        h.push(0xf0 | I64); // a list of 20 i64, size in a varint
        h.push(20);
        for i in 0..20 {
            h.extend(zigzag(i * 1000));
        }
        h.push(field(1, MAP)); // 41: map<binary, bool>, 2 entries
        h.push(2);
        h.push(BINARY << 4 | BOOL_TRUE);
        h.extend([1, b'k', 1, 1, b'l', 2]);
        h.push(field(1, UUID)); // 42
        h.extend([0u8; 16]);
        h.push(field(1, DOUBLE)); // 43
        h.extend([0u8; 8]);
        h.push(field(0, I32)); // back to field 3 in long form
        h.extend(zigzag(3));
        h.extend(zigzag(5));
        h.push(0);
        let (header, len) = page_header(&h).expect("a header");
        assert_eq!(
            (header.uncompressed, header.compressed),
            (Some(77), Some(5))
        );
        assert_eq!(len, h.len());
    }

    #[test]
    fn cut_headers_are_truncated_and_garbage_is_invalid() {
        let h = data_page(4000, 900, 512);
        for cut in 0..h.len() {
            assert_eq!(page_header(&h[..cut]), Err(Walk::Truncated), "cut at {cut}");
        }
        // An unknown type code.
        assert_eq!(page_header(&[field(1, 14)]), Err(Walk::Invalid));
        // An over-long varint reads as the crate reads it: the fuzzed header's 18 bytes claim
        // 1,893,843,855 (the size parquet allocated for that page).
        let mut long = vec![field(2, I32)];
        long.extend([0xe1; 17]);
        long.extend([0x10, 0x10]); // last varint byte, then a stop field with a delta
        let (h, len) = page_header(&long).expect("a header");
        assert_eq!((h.uncompressed, len), (Some(1_893_843_855), long.len()));
        // Structs nested deeper than MAX_DEPTH.
        let deep = vec![field(1, STRUCT); 100];
        assert_eq!(page_header(&deep), Err(Walk::Invalid));
        // A list declaring 2^31 elements in a few bytes ends at the bytes' end, not after 2^31
        // iterations.
        let huge = [
            field(1, LIST),
            0xf0 | I32,
            0xff,
            0xff,
            0xff,
            0xff,
            0x07,
            1,
            2,
        ];
        assert_eq!(page_header(&huge), Err(Walk::Truncated));
    }
}

// The fuzz harness every reader's target runs, shared with the seeded-corpus test
// (`tests/it/protocol_fuzz_corpus.rs` includes this file): any bytes are read without
// panicking, every diagnostic and call has a place inside the text, and streaming the
// same bytes in three chunks gives the one-shot result.

use tavern::internal::protocol::{parse, Format, StreamReader};

/// Checks one input read as `format`.
pub fn check(data: &[u8], format: Format) {
    let text = String::from_utf8_lossy(data);
    let one = parse(&text, format);
    let lines = text.split('\n').count() as u32 + text.matches('\r').count() as u32;
    for d in &one.diagnostics {
        assert!(d.line >= 1 && d.column >= 1 && d.line <= lines + 1, "{d:?}");
    }
    for c in &one.calls {
        assert!(c.span.start <= c.span.end && c.span.end <= text.len(), "{c:?}");
        assert!(c.span.line >= 1 && c.span.column >= 1, "{c:?}");
        // The `json` row marks a call object written with `parameters` as Llama's.
        if format != Format::Auto && !(format == Format::Json && c.source == Format::LlamaJson) {
            assert_eq!(c.source, format, "{c:?}");
        }
    }
    let mut r = StreamReader::new(format);
    let a = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let b = data.last().map_or(0, |&b| (a + b as usize) % (data.len() + 1)).max(a);
    let mut streamed = r.push_bytes(&data[..a]);
    streamed.extend(r.push_bytes(&data[a..b]));
    streamed.extend(r.push_bytes(&data[b..]));
    let fin = r.finish();
    assert_eq!(fin, one);
    assert!(one.calls.starts_with(&streamed));
}

//! Every format reads any bytes without panicking, and streaming the same bytes in
//! two chunks gives the one-shot result.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tavern::protocol::{parse, Format, StreamReader};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for f in [Format::Auto, Format::Tam, Format::Vcp, Format::Action, Format::Json] {
        let one = parse(&text, f);
        let mut r = StreamReader::new(f);
        let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
        r.push_bytes(&data[..cut]);
        r.push_bytes(&data[cut..]);
        assert_eq!(r.finish(), one);
    }
});

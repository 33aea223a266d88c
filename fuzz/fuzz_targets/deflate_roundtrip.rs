#![no_main]
// See src/lib.rs (`deflate_roundtrip`) for the input format and the properties checked.
libfuzzer_sys::fuzz_target!(|data: &[u8]| native_ws_fuzz::deflate_roundtrip(data));

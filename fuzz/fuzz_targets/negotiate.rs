#![no_main]
// See src/lib.rs (`negotiate`) for the input format and the properties checked.
libfuzzer_sys::fuzz_target!(|data: &[u8]| native_ws_fuzz::negotiate(data));

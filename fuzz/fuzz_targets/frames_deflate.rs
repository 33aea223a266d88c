#![no_main]
// See src/lib.rs (`frames_deflate`) for the input format and the properties checked.
libfuzzer_sys::fuzz_target!(|data: &[u8]| native_ws_fuzz::frames_deflate(data));

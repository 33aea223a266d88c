#![no_main]
// See src/lib.rs (`proxy`) for the input format and the properties checked.
libfuzzer_sys::fuzz_target!(|data: &[u8]| native_ws_fuzz::proxy(data));
